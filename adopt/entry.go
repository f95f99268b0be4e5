package adopt

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/spf13/afero"

	"github.com/catena-cni/catena/libchain"
)

// maxEntrySize bounds what is read of one cache file. Real entries hold a
// conflist and a result: a few KB.
const maxEntrySize = 1 << 20

// entry is one libcni cache file: the fields of libcni's cachedInfo
// (libcni/api.go), kept raw where Catena only passes them on.
type entry struct {
	Kind           string                     `json:"kind"`
	ContainerID    string                     `json:"containerId"`
	Config         []byte                     `json:"config"` // base64 in the file
	IfName         string                     `json:"ifName"`
	NetworkName    string                     `json:"networkName"`
	NetNS          string                     `json:"netns,omitempty"`
	CNIArgs        [][2]string                `json:"cniArgs,omitempty"`
	CapabilityArgs map[string]json.RawMessage `json:"capabilityArgs,omitempty"`
	Result         json.RawMessage            `json:"result,omitempty"`

	// name is the file's name in the results dir; modTime when libcni
	// wrote it, at the end of the ADD.
	name    string
	modTime time.Time
}

// candidate is a cache file that may belong to the network: libcni names it
// <network>-<containerID>-<ifname>.
type candidate struct {
	name string
	info os.FileInfo
}

// listCandidates returns the files of dir that may be network's, sorted, and
// a skip reason for every other file. A missing dir holds nothing.
func listCandidates(fsys afero.Fs, dir, network string) ([]candidate, []string, error) {
	infos, err := afero.ReadDir(fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the libcni cache %s: %w", dir, err)
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name() < infos[j].Name() })
	var out []candidate
	var skipped []string
	for _, fi := range infos {
		name := fi.Name()
		if !strings.HasPrefix(name, network+"-") {
			skipped = append(skipped, name+": not of network "+network)
			continue
		}
		if why := checkEntryInfo(fi); why != "" {
			skipped = append(skipped, name+": "+why)
			continue
		}
		out = append(out, candidate{name: name, info: fi})
	}
	return out, skipped, nil
}

// checkEntryInfo refuses anything but a regular file of bounded size; the
// info is an lstat, so a symlink is seen as one.
func checkEntryInfo(fi os.FileInfo) string {
	mode := fi.Mode()
	switch {
	case mode&fs.ModeSymlink != 0:
		return "is a symlink"
	case mode.IsDir():
		return "is a directory"
	case !mode.IsRegular():
		return fmt.Sprintf("is not a regular file (%s)", mode.Type())
	case fi.Size() > maxEntrySize:
		return fmt.Sprintf("too large (%d bytes, at most %d)", fi.Size(), maxEntrySize)
	}
	return ""
}

// readEntry reads and checks one cache file of network. An error is a reason
// to skip the file.
func readEntry(fsys afero.Fs, path string, c candidate, network string) (*entry, error) {
	data, err := readBounded(fsys, path)
	if err != nil {
		return nil, err
	}
	e := &entry{name: c.name, modTime: c.info.ModTime()}
	if err := json.Unmarshal(data, e); err != nil {
		return nil, fmt.Errorf("not a libcni cache entry: %w", err)
	}
	switch {
	case e.Kind != libcni.CNICacheV1:
		return nil, fmt.Errorf("kind %q is not %q (legacy or foreign entry)", e.Kind, libcni.CNICacheV1)
	case e.NetworkName != network:
		return nil, fmt.Errorf("of network %q, not %q", e.NetworkName, network)
	case c.name != e.NetworkName+"-"+e.ContainerID+"-"+e.IfName:
		return nil, fmt.Errorf("file name does not match its content (network %q, container %q, ifname %q)",
			e.NetworkName, e.ContainerID, e.IfName)
	case len(e.Result) == 0 || string(e.Result) == "null":
		return nil, errors.New("no cached result")
	}
	return e, nil
}

// readBounded reads at most maxEntrySize bytes of the regular file at path
// without following a symlink swapped in after the listing or blocking on a
// FIFO.
func readBounded(fsys afero.Fs, path string) ([]byte, error) {
	return libchain.ReadSmallFile(fsys, path, maxEntrySize, true)
}
