package leaks

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/libchain/libcnientry"
)

// cachedConf is the config a runtime's libcni cache entry holds: what its
// owner's ADD ran with, which may differ from the conf dir's now (a data
// dir moved, a plugin added). The owner's findings are released with it.
type cachedConf struct {
	path  string
	owner Owner
	net   *network
}

// readCachedConf reads the libcni cache entry at path: its owner and, when
// it holds one that parses, its config. An entry another user could have
// written, a symlink or an oversized file is an error.
func readCachedConf(fsys afero.Fs, path string) (*cachedConf, error) {
	data, _, err := libcnientry.Read(fsys, path)
	if err != nil {
		return nil, err
	}
	var e struct {
		ContainerID string `json:"containerId"`
		IfName      string `json:"ifName"`
		NetworkName string `json:"networkName"`
		Config      []byte `json:"config"` // base64 in the file
	}
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("libcni cache entry %s: %w", path, err)
	}
	if e.ContainerID == "" || e.NetworkName == "" {
		return nil, fmt.Errorf("libcni cache entry %s: no container ID or network", path)
	}
	c := &cachedConf{path: path, owner: Owner{Network: e.NetworkName, ContainerID: e.ContainerID, IfName: e.IfName}}
	if len(e.Config) > 0 {
		n, err := parseNetwork(path, e.Config)
		if err != nil {
			return c, fmt.Errorf("libcni cache entry %s: its config: %w", path, err)
		}
		if n.Name != e.NetworkName {
			return c, fmt.Errorf("libcni cache entry %s: its config is network %q, not %q", path, n.Name, e.NetworkName)
		}
		c.net = n
	}
	return c, nil
}

// delegateFor is the plugin of c's config that made f, or nil: for a
// reservation the plugin whose host-local writes in f's dir, for a chain
// the portmap plugin, for a scratch file the flannel plugin of its dir.
func (c *cachedConf) delegateFor(f Finding, defaultHostLocal string) *Delegate {
	if c.net == nil {
		return nil
	}
	var dirs map[string]Delegate
	var dir string
	switch f.Kind {
	case KindPortmap:
		return c.net.delegateOfType("portmap")
	case KindHostLocal: // <dataDir>/<network>/<IP>
		dirs, dir = c.net.hostLocalDirs(defaultHostLocal), filepath.Dir(filepath.Dir(f.Evidence))
	case KindFlannel: // <dataDir>/<container ID>
		dirs, dir = c.net.flannelDirs(), filepath.Dir(f.Evidence)
	default:
		return nil
	}
	if d, ok := dirs[dir]; ok {
		return &d
	}
	return nil
}

// withCachedConfigs gives each finding whose owner has a libcni cache
// entry of its network that entry's config, and the delegate of that
// config that made it: the config the owner's ADD ran with is what its DEL
// must run with. A finding whose owner has no entry, read in a dir only a
// cached config names, has no delegate (its owner's config is unknown).
func withCachedConfigs(fs []Finding, cached map[[2]string]*cachedConf, fromCacheOnly map[string]bool, defaultHostLocal string) {
	for i, f := range fs {
		c, ok := cached[[2]string{f.Owner.Network, f.Owner.ContainerID}]
		switch {
		case ok && c.net != nil && (c.owner.IfName == f.Owner.IfName || f.Owner.IfName == ""):
			fs[i].CachedConfig = c.path
			fs[i].Delegate = c.delegateFor(f, defaultHostLocal)
			if fs[i].Owner.IfName == "" {
				fs[i].Owner.IfName = c.owner.IfName
			}
		case ok:
			fs[i].Delegate = nil
			fs[i].Verdict, fs[i].Why = Keep, "its owner's libcni cache entry "+c.path+
				" holds no config that parses, or is of another ifname: the config its DEL needs is unknown"
		case fromCacheOnly[f.Evidence]:
			fs[i].Delegate = nil
		}
	}
}
