package nodeconf

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/catena-cni/catena/libchain"
)

// CatenaOptions are Catena's own fields in the generated config. Empty
// fields are left out, so that Catena's defaults apply.
type CatenaOptions struct {
	CacheDir        string
	LockTimeout     time.Duration
	DelegateTimeout time.Duration
	SlowThreshold   time.Duration
	GCGracePeriod   time.Duration
	LogFile         string
	LogLevel        string
	// LibcniResultsDir is the runtime's libcni results dir (the agent's
	// --results-dir), so that a DEL with no record adopts the primary's
	// attachment there.
	LibcniResultsDir string
	// DelegateVersions is how the delegates' versions are chosen (the
	// agent's --delegate-versions); "" is DelegateVersionsPrimary.
	DelegateVersions DelegateVersionsMode
}

// DelegateVersionsMode says at which CNI version Catena calls the wrapped
// primary's plugins.
type DelegateVersionsMode string

const (
	// DelegateVersionsAuto: every delegate's cniVersion is "auto" (Catena
	// calls each at the highest version its binary's VERSION and Catena
	// share), and the generated file offers the runtime CNI 1.1.0 besides
	// the primary's versions (cniVersions), so that a runtime that knows
	// 1.1.0 calls Catena at it and sends it STATUS and GC. The agent's
	// default.
	DelegateVersionsAuto DelegateVersionsMode = "auto"
	// DelegateVersionsPrimary: the primary's versions as written; every
	// delegate inherits the version the runtime picks from them.
	DelegateVersionsPrimary DelegateVersionsMode = "primary"
)

// offered is the CNI version the generated file offers the runtime with
// DelegateVersionsAuto: the newest Catena speaks.
const offered = "1.1.0"

// Validate accepts "", auto and primary.
func (m DelegateVersionsMode) Validate() error {
	return oneOf("delegate versions", m, DelegateVersionsAuto, DelegateVersionsPrimary)
}

// catenaPlugin is the one plugin of the generated conflist.
type catenaPlugin struct {
	Type            string            `json:"type"`
	CacheDir        string            `json:"cacheDir,omitempty"`
	LockTimeout     string            `json:"lockTimeout,omitempty"`
	DelegateTimeout string            `json:"delegateTimeout,omitempty"`
	SlowThreshold   string            `json:"slowThreshold,omitempty"`
	GCGracePeriod   string            `json:"gcGracePeriod,omitempty"`
	LogFile         string            `json:"logFile,omitempty"`
	LogLevel        string            `json:"logLevel,omitempty"`
	Capabilities    map[string]bool   `json:"capabilities,omitempty"`
	Delegates       []json.RawMessage `json:"delegates"`
	// LibcniResultsDir: see CatenaOptions.
	LibcniResultsDir string `json:"libcniResultsDir,omitempty"`
	// LibcniNetworkDirPlugins counts the last delegates that came from the
	// primary's network dir, for a DEL that adopts (libchain.NetConf).
	LibcniNetworkDirPlugins int `json:"libcniNetworkDirPlugins,omitempty"`
}

// generated is the generated conflist. Field order is fixed, so the same
// primary and options always give the same bytes.
type generated struct {
	CNIVersion   json.RawMessage `json:"cniVersion,omitempty"`
	CNIVersions  json.RawMessage `json:"cniVersions,omitempty"`
	Name         string          `json:"name"`
	DisableCheck bool            `json:"disableCheck,omitempty"`
	DisableGC    bool            `json:"disableGC,omitempty"`
	// LoadOnlyInlinedPlugins is always true: the file has the primary's
	// network name, and a runtime with libcni v1.3 would otherwise append
	// the network dir's plugins after catena, which runs them already.
	LoadOnlyInlinedPlugins bool           `json:"loadOnlyInlinedPlugins"`
	Generated              Generated      `json:"catena.dev/generated"`
	Plugins                []catenaPlugin `json:"plugins"`
}

// Wrap returns the conflist that runs through Catena what the runtime runs
// for p: p's name, its cniVersion and cniVersions as written (each runtime
// then picks the version it picked for p), disableCheck and disableGC, and
// loadOnlyInlinedPlugins; one catena plugin whose delegates are p's plugins
// (its own, then its network dir's) verbatim but for the name and
// cniVersion that libcni overrides in every plugin, and whose capabilities
// are the union of theirs; and the generated key naming p's file and hash and the
// network dir's files and hashes. The result is validated as the catena
// plugin will parse it, so an invalid delegate is refused here, before
// anything is written.
func Wrap(p *Primary, opts CatenaOptions) ([]byte, error) {
	if len(p.plugins) == 0 {
		return nil, fmt.Errorf("wrapping %s: no plugins", p.File)
	}
	caps := map[string]bool{}
	delegates := make([]json.RawMessage, len(p.plugins))
	for n, raw := range p.plugins {
		var pl struct {
			Capabilities map[string]bool `json:"capabilities"`
		}
		if err := json.Unmarshal(raw, &pl); err != nil {
			return nil, fmt.Errorf("wrapping %s: plugin %d: %w", p.File, n, err)
		}
		for k, v := range pl.Capabilities {
			if v {
				caps[k] = true
			}
		}
		d, err := inheriting(raw, opts.DelegateVersions == DelegateVersionsAuto)
		if err != nil {
			return nil, fmt.Errorf("wrapping %s: plugin %d: %w", p.File, n, err)
		}
		delegates[n] = d
	}
	plugin := catenaPlugin{
		Type:            "catena",
		CacheDir:        opts.CacheDir,
		LockTimeout:     duration(opts.LockTimeout),
		DelegateTimeout: duration(opts.DelegateTimeout),
		SlowThreshold:   duration(opts.SlowThreshold),
		GCGracePeriod:   duration(opts.GCGracePeriod),
		LogFile:         opts.LogFile,
		LogLevel:        opts.LogLevel,
		Delegates:       delegates,
		// See CatenaOptions.
		LibcniResultsDir: opts.LibcniResultsDir,
	}
	var err error
	if opts.LibcniResultsDir != "" {
		plugin.LibcniNetworkDirPlugins = len(p.DirPlugins)
	}
	if len(caps) > 0 {
		plugin.Capabilities = caps
	}
	gen := Generated{By: generatedBy, Source: p.File, SHA256: p.SHA256}
	for _, dp := range p.DirPlugins {
		gen.NetworkDir = append(gen.NetworkDir, WrappedFile{File: dp.File, SHA256: dp.SHA256})
	}
	cniVersions := p.versions.CNIVersions
	if opts.DelegateVersions == DelegateVersionsAuto {
		if cniVersions, err = offering(p, offered); err != nil {
			return nil, fmt.Errorf("wrapping %s: %w", p.File, err)
		}
	}
	out, err := json.MarshalIndent(generated{
		CNIVersion:             p.versions.CNIVersion,
		CNIVersions:            cniVersions,
		Name:                   p.List.Name,
		DisableCheck:           p.List.DisableCheck,
		DisableGC:              p.List.DisableGC,
		LoadOnlyInlinedPlugins: true,
		Generated:              gen,
		Plugins:                []catenaPlugin{plugin},
	}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("wrapping %s: %w", p.File, err)
	}
	out = append(out, '\n')
	if _, err := libchain.CatenaConf(out); err != nil {
		return nil, fmt.Errorf("wrapping %s: catena would refuse the result: %w", p.File, err)
	}
	return out, nil
}

// duration renders d as Catena parses it, or "" (left out) for zero.
func duration(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// inheriting returns a plugin config without the name and cniVersion that
// libcni overrides in every plugin with the list's (buildOneConfig): as a
// delegate, it then inherits catena's, which the runtime sets to the
// list's, where catena would honour a delegate's own cniVersion. With auto
// its cniVersion is "auto" instead: catena asks the binary. A config
// without either, and not auto, is returned as is.
func inheriting(raw json.RawMessage, auto bool) (json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	_, hasName := fields["name"]
	_, hasVersion := fields["cniVersion"]
	if !hasName && !hasVersion && !auto {
		return raw, nil
	}
	delete(fields, "name")
	delete(fields, "cniVersion")
	if auto {
		fields["cniVersion"] = json.RawMessage(`"` + libchain.AutoVersion + `"`)
	}
	return json.Marshal(fields)
}

// offering returns the cniVersions of the generated file that offers the
// runtime v besides p's own versions: p's cniVersions as written with v
// appended, or [p's cniVersion, v]; p's own when they hold v already. Its
// cniVersion stays p's: a runtime whose libcni predates cniVersions (1.1,
// in containerd 1.6) refuses a cniVersion it does not know, and one that
// knows cniVersions picks the highest of both it supports.
func offering(p *Primary, v string) (json.RawMessage, error) {
	var (
		own  string
		list []string
	)
	if len(p.versions.CNIVersion) > 0 {
		if err := json.Unmarshal(p.versions.CNIVersion, &own); err != nil {
			return nil, fmt.Errorf("cniVersion: %w", err)
		}
	}
	if len(p.versions.CNIVersions) > 0 {
		if err := json.Unmarshal(p.versions.CNIVersions, &list); err != nil {
			return nil, fmt.Errorf("cniVersions: %w", err)
		}
	}
	if own == v || slices.Contains(list, v) {
		return p.versions.CNIVersions, nil
	}
	if len(list) == 0 && own != "" {
		list = []string{own}
	}
	return json.Marshal(append(list, v))
}
