package leaks

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/fileutil"
)

// DefaultHostLocalDir is host-local's dataDir when its config names none.
const DefaultHostLocalDir = "/var/lib/cni/networks"

// DefaultFlannelDir is flannel's dataDir when its config names none.
const DefaultFlannelDir = "/var/lib/cni/flannel"

// maxConf bounds a config file read from the conf dir.
const maxConf = 1 << 20

// network is one network's config as the conf dir has it: its plugins,
// the delegates of catena's entry when it wraps them.
type network struct {
	Name       string
	CNIVersion string
	File       string
	Plugins    []json.RawMessage
}

// plugin is what a finding needs of a plugin's config.
type plugin struct {
	Type string `json:"type"`
	IPAM *struct {
		Type    string `json:"type"`
		DataDir string `json:"dataDir"`
	} `json:"ipam"`
	Delegates []json.RawMessage `json:"delegates"`
	// DataDir is flannel's.
	DataDir string `json:"dataDir"`
	// Bridge is bridge's.
	Bridge string `json:"bridge"`
}

// DefaultBridge is the bridge plugin's bridge when its config names none
// (and flannel's delegate's).
const DefaultBridge = "cni0"

// bridges are the bridges n's plugins attach to.
func (n *network) bridges() []string {
	var out []string
	for _, raw := range n.Plugins {
		var p plugin
		if json.Unmarshal(raw, &p) != nil {
			continue
		}
		switch {
		case p.Type == "bridge" && p.Bridge != "":
			out = append(out, p.Bridge)
		case p.Type == "bridge" || p.Type == "flannel":
			out = append(out, DefaultBridge)
		}
	}
	return out
}

// readNetworks reads every .conflist and .conf of dir: a catena entry's
// delegates stand for it. A file that does not parse is an input error,
// not a network.
func readNetworks(fsys afero.Fs, dir string) (map[string]*network, Input) {
	in := Input{What: "network configs", Where: dir}
	nets := map[string]*network{}
	entries, err := afero.ReadDir(fsys, dir)
	if err != nil {
		in.Error = err.Error()
		return nets, in
	}
	var bad []string
	for _, e := range entries {
		name := e.Name()
		if !e.Mode().IsRegular() || (!strings.HasSuffix(name, ".conflist") && !strings.HasSuffix(name, ".conf")) {
			continue
		}
		n, err := readNetwork(fsys, filepath.Join(dir, name))
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		if _, dup := nets[n.Name]; !dup { // the first in the runtime's order
			nets[n.Name] = n
			in.Count++
		}
	}
	if len(bad) > 0 {
		in.Error = strings.Join(bad, "; ")
	}
	return nets, in
}

func readNetwork(fsys afero.Fs, path string) (*network, error) {
	b, err := fileutil.ReadSmallFile(fsys, path, maxConf, true)
	if err != nil {
		return nil, err
	}
	return parseNetwork(path, b)
}

// parseNetwork parses b, a .conflist or a .conf read from path (a conf
// dir's file, or the config a libcni cache entry holds).
func parseNetwork(path string, b []byte) (*network, error) {
	var c struct {
		Name       string            `json:"name"`
		CNIVersion string            `json:"cniVersion"`
		Plugins    []json.RawMessage `json:"plugins"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if c.Plugins == nil && strings.HasSuffix(path, ".conf") {
		c.Plugins = []json.RawMessage{b}
	}
	if c.Name == "" || len(c.Plugins) == 0 {
		return nil, fmt.Errorf("%s: no name or no plugins", path)
	}
	n := &network{Name: c.Name, CNIVersion: c.CNIVersion, File: path, Plugins: c.Plugins}
	if len(c.Plugins) == 1 {
		var p plugin
		if json.Unmarshal(c.Plugins[0], &p) == nil && p.Type == "catena" && len(p.Delegates) > 0 {
			n.Plugins = p.Delegates
		}
	}
	return n, nil
}

// hostLocalDirs are the data dirs of n's host-local reservations, each
// with the plugin whose DEL releases them: the one whose ipam is
// host-local, or flannel (its delegate's host-local, in defaultDir).
func (n *network) hostLocalDirs(defaultDir string) map[string]Delegate {
	dirs := map[string]Delegate{}
	for i, raw := range n.Plugins {
		var p plugin
		if json.Unmarshal(raw, &p) != nil {
			continue
		}
		switch {
		case p.IPAM != nil && p.IPAM.Type == "host-local":
			dir := p.IPAM.DataDir
			if dir == "" {
				dir = defaultDir
			}
			if _, seen := dirs[dir]; !seen {
				dirs[dir] = Delegate{Index: i, Type: p.Type}
			}
		case p.Type == "flannel":
			// flannel delegates to bridge with host-local in its
			// default dir, and its DEL releases what that holds.
			if _, seen := dirs[defaultDir]; !seen {
				dirs[defaultDir] = Delegate{Index: i, Type: p.Type}
			}
		}
	}
	return dirs
}

// flannelDirs are the scratch dirs of n's flannel plugins, each with its
// plugin.
func (n *network) flannelDirs() map[string]Delegate {
	dirs := map[string]Delegate{}
	for i, raw := range n.Plugins {
		var p plugin
		if json.Unmarshal(raw, &p) != nil || p.Type != "flannel" {
			continue
		}
		dir := p.DataDir
		if dir == "" {
			dir = DefaultFlannelDir
		}
		if _, seen := dirs[dir]; !seen {
			dirs[dir] = Delegate{Index: i, Type: p.Type}
		}
	}
	return dirs
}

// delegateOfType is the first plugin of n of type typ.
func (n *network) delegateOfType(typ string) *Delegate {
	for i, raw := range n.Plugins {
		var p plugin
		if json.Unmarshal(raw, &p) == nil && p.Type == typ {
			return &Delegate{Index: i, Type: typ}
		}
	}
	return nil
}

// pluginConf is plugin i of n as a delegate gets it on stdin: with the
// network's name and cniVersion.
func (n *network) pluginConf(i int) ([]byte, error) {
	if i < 0 || i >= len(n.Plugins) {
		return nil, fmt.Errorf("network %s has no plugin %d", n.Name, i)
	}
	var m map[string]any
	if err := json.Unmarshal(n.Plugins[i], &m); err != nil {
		return nil, fmt.Errorf("network %s plugin %d: %w", n.Name, i, err)
	}
	m["name"], m["cniVersion"] = n.Name, n.CNIVersion
	delete(m, "prevResult")
	return json.Marshal(m)
}

func sortedNames(nets map[string]*network) []string {
	names := make([]string, 0, len(nets))
	for n := range nets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
