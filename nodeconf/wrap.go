package nodeconf

import (
	"encoding/json"
	"fmt"
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
}

// generated is the generated conflist. Field order is fixed, so the same
// primary and options always give the same bytes.
type generated struct {
	CNIVersion   string         `json:"cniVersion,omitempty"`
	Name         string         `json:"name"`
	DisableCheck bool           `json:"disableCheck,omitempty"`
	DisableGC    bool           `json:"disableGC,omitempty"`
	Marker       Marker         `json:"catena.dev/generated"`
	Plugins      []catenaPlugin `json:"plugins"`
}

// Wrap returns the conflist that runs p's plugins through Catena: p's name,
// cniVersion, disableCheck and disableGC; one catena plugin whose delegates
// are p's plugins verbatim and whose capabilities are the union of theirs;
// and the marker naming p's file and hash. The result is validated as the
// catena plugin will parse it, so an invalid delegate is refused here,
// before anything is written.
func Wrap(p *Primary, opts CatenaOptions) ([]byte, error) {
	caps := map[string]bool{}
	for _, pl := range p.List.Plugins {
		for k, v := range pl.Network.Capabilities {
			if v {
				caps[k] = true
			}
		}
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
		Delegates:       p.plugins,
		// See CatenaOptions.
		LibcniResultsDir: opts.LibcniResultsDir,
	}
	if len(caps) > 0 {
		plugin.Capabilities = caps
	}
	out, err := json.MarshalIndent(generated{
		CNIVersion:   p.List.CNIVersion,
		Name:         p.List.Name,
		DisableCheck: p.List.DisableCheck,
		DisableGC:    p.List.DisableGC,
		Marker:       Marker{By: markerBy, Source: p.File, SHA256: p.SHA256},
		Plugins:      []catenaPlugin{plugin},
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
