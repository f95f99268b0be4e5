package nodeconf

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/utils"
	"github.com/spf13/afero"
)

// NetworkDirMode says whether the runtime reads a network's plugin dir,
// <conf dir>/<network name>/*.conf: libcni v1.3 appends its plugins to a
// .conflist's own unless the list sets loadOnlyInlinedPlugins. That is
// containerd 2.1 and later (go-cni's loadFromConfDir calls libcni's
// ConfListFromFile for a .conflist) and CRI-O 1.33 and later (ocicni's
// loadNetworks, likewise); older ones never read the dir.
type NetworkDirMode string

const (
	// NetworkDirLoad: the runtime reads the dir (libcni v1.3 and later);
	// the default.
	NetworkDirLoad NetworkDirMode = "load"
	// NetworkDirIgnore: the runtime does not (containerd 2.0 and earlier,
	// CRI-O 1.32 and earlier).
	NetworkDirIgnore NetworkDirMode = "ignore"
)

// Validate accepts "", load and ignore.
func (m NetworkDirMode) Validate() error {
	return oneOf("network dir mode", m, NetworkDirLoad, NetworkDirIgnore)
}

// maxDirPlugins bounds the plugin files read from a network dir; more is
// refused rather than wrapped in part.
const maxDirPlugins = 64

// DirPlugin is one plugin file of a network dir.
type DirPlugin struct {
	// File is the file's path relative to the conf dir: <network>/<name>.
	File string
	// SHA256 is the hex digest of the file's bytes as read.
	SHA256 string
	// Mode is the file's permission bits.
	Mode fs.FileMode
	// Raw is the plugin config, verbatim.
	Raw []byte
	// Type is the plugin's type.
	Type string
}

// NetworkDir is the path of network's plugin dir in confDir, as libcni
// joins it; "" for a name that is not a valid network name (CNI spec: it
// may not name another dir, and libcni's ADD refuses it anyway).
func NetworkDir(confDir, network string) string {
	if utils.ValidateNetworkName(network) != nil {
		return ""
	}
	return filepath.Join(confDir, network)
}

// readsNetworkDir reports whether the runtime appends the network dir's
// plugins to the primary file's: only a .conflist (go-cni and CRI-O read a
// .conf or .json as one plugin, without the dir), only without
// loadOnlyInlinedPlugins, only if the runtime reads the dir at all.
func readsNetworkDir(file string, list *libcni.NetworkConfigList, mode NetworkDirMode) bool {
	return mode != NetworkDirIgnore && strings.HasSuffix(file, ".conflist") && !list.LoadOnlyInlinedPlugins
}

// ReadNetworkDir reads network's plugin dir in confDir as libcni v1.3's
// NetworkPluginConfsFromFiles does: the entries ending in .conf that are not
// dirs, in lexical order, each a plugin config with a type (a file libcni
// would refuse is an error, as the runtime would fail to load the primary).
// A missing dir has none. Files are read through symlinks, as libcni does,
// bounded, never blocking on a FIFO.
func ReadNetworkDir(fsys afero.Fs, confDir, network string) ([]DirPlugin, error) {
	dir := NetworkDir(confDir, network)
	if dir == "" {
		return nil, fmt.Errorf("network name %q: %w", network, utils.ValidateNetworkName(network))
	}
	names, err := listFiles(fsys, dir, []string{".conf"})
	if err != nil {
		return nil, fmt.Errorf("reading the network dir %s: %w", dir, err)
	}
	if len(names) > maxDirPlugins {
		return nil, fmt.Errorf("the network dir %s holds %d plugin files, more than %d", dir, len(names), maxDirPlugins)
	}
	out := make([]DirPlugin, 0, len(names))
	for _, name := range names {
		p, err := readDirPlugin(fsys, dir, network, name)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func readDirPlugin(fsys afero.Fs, dir, network, name string) (DirPlugin, error) {
	rel := filepath.Join(network, name)
	path := filepath.Join(dir, name)
	data, err := readRegular(fsys, path, maxConfSize)
	if err != nil {
		return DirPlugin{}, fmt.Errorf("network dir plugin %s: %w", rel, err)
	}
	fi, err := fsys.Stat(path)
	if err != nil {
		return DirPlugin{}, fmt.Errorf("network dir plugin %s: %w", rel, err)
	}
	if !json.Valid(data) {
		return DirPlugin{}, fmt.Errorf("network dir plugin %s: not valid JSON (half-written?)", rel)
	}
	conf, err := libcni.NetworkPluginConfFromBytes(data)
	if err != nil {
		return DirPlugin{}, fmt.Errorf("network dir plugin %s: %w", rel, err)
	}
	if err := checkNesting("", data); err != nil {
		return DirPlugin{}, fmt.Errorf("network dir plugin %s: %w", rel, err)
	}
	sum := sha256.Sum256(data)
	return DirPlugin{File: rel, SHA256: hex.EncodeToString(sum[:]), Mode: fi.Mode().Perm(), Raw: data, Type: conf.Network.Type}, nil
}
