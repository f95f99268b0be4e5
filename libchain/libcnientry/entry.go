package libcnientry

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/spf13/afero"

	"github.com/catena-cni/catena/fileutil"
)

// MaxSize bounds what is read of one cache entry: a larger file is not
// adopted. Real entries hold a conflist and a result: a few KB.
const MaxSize = 1 << 20

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

// FileID identifies one version of a cache file: libcni rewrites an entry
// in place (os.WriteFile), which changes its size or times; a chmod or
// chown changes its ctime. Filesystems without a stat_t (the tests') have
// only size and mtime. FileIDs are comparable.
type FileID struct {
	ino          uint64
	size         int64
	mtime, ctime int64
}

// IDOf returns the identity of the version of the file fi describes.
func IDOf(fi os.FileInfo) FileID {
	id := FileID{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.ino, id.ctime = st.Ino, st.Ctim.Nano()
	}
	return id
}

// Vet checks fi, an lstat of the entry at path, before the entry is read:
// an error wrapping fileutil.ErrUntrusted when another user could have
// written it (the entry is refused), another error when it is not a
// regular file of at most MaxSize bytes (skipped), nil when it may be read.
func Vet(path string, fi os.FileInfo) error {
	if why := checkEntryInfo(fi); why != "" {
		return errors.New(why)
	}
	return fileutil.CheckPrivateFile(path, fi)
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
	case fi.Size() > MaxSize:
		return fmt.Sprintf("too large (%d bytes, at most %d)", fi.Size(), MaxSize)
	}
	return ""
}

// Read reads the entry at path through fsys (a fileutil.TrustedFs on the real
// disk), at most MaxSize bytes of a regular file, without following a
// symlink swapped in after the listing or blocking on a FIFO, and returns
// them with the identity of what was read (its fstat). A file another user
// could have written is an error wrapping fileutil.ErrUntrusted; a file gone
// since the listing one wrapping fs.ErrNotExist.
func Read(fsys afero.Fs, path string) ([]byte, FileID, error) {
	f, _, err := fileutil.OpenRegular(fsys, path, MaxSize, true)
	if err != nil {
		return nil, FileID{}, err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, FileID{}, fmt.Errorf("stat %s: %w", path, err)
	}
	id := IDOf(fi)
	if err := fileutil.CheckPrivateFile(path, fi); err != nil {
		return nil, id, err
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	switch {
	case err != nil:
		return nil, id, fmt.Errorf("read %s: %w", path, err)
	case len(data) > MaxSize:
		return nil, id, fmt.Errorf("%s is larger than %d bytes", path, MaxSize)
	}
	return data, id, nil
}

// parseEntry parses data, the content of the cache file name written at
// modTime, as an entry of network. An error is a reason to skip the file.
func parseEntry(name string, data []byte, modTime time.Time, network string) (*entry, error) {
	e := &entry{name: name, modTime: modTime}
	if err := json.Unmarshal(data, e); err != nil {
		return nil, fmt.Errorf("not a libcni cache entry: %w", err)
	}
	switch {
	case e.Kind != libcni.CNICacheV1:
		return nil, fmt.Errorf("kind %q is not %q (legacy or foreign entry)", e.Kind, libcni.CNICacheV1)
	case e.NetworkName != network:
		return nil, fmt.Errorf("of network %q, not %q", e.NetworkName, network)
	case name != e.NetworkName+"-"+e.ContainerID+"-"+e.IfName:
		return nil, fmt.Errorf("file name does not match its content (network %q, container %q, ifname %q)",
			e.NetworkName, e.ContainerID, e.IfName)
	case len(e.Result) == 0 || string(e.Result) == "null":
		return nil, errors.New("no cached result")
	}
	return e, nil
}
