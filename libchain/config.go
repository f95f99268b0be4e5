package libchain

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/catena-cni/catena/libchain/invoke"
)

// Defaults for optional config fields.
const (
	DefaultCacheDir        = "/var/lib/cni/catena"
	DefaultLockTimeout     = 30 * time.Second
	DefaultDelegateTimeout = 60 * time.Second
	DefaultGCGracePeriod   = 2 * time.Minute
)

// MaxDelegates bounds the chain: every step rewrites the whole record, so
// the write cost of an ADD grows with the square of the chain's length.
const MaxDelegates = 64

// NetConf is Catena's own network configuration.
type NetConf struct {
	CNIVersion      string
	Name            string
	CacheDir        string
	LockTimeout     time.Duration
	DelegateTimeout time.Duration
	SlowThreshold   time.Duration
	// GCGracePeriod protects records younger than this from GC, so that an
	// ADD begun after the runtime computed its valid list is never reclaimed.
	GCGracePeriod time.Duration
	// DisableGC makes GC a no-op for Catena's records and its delegates.
	DisableGC bool
	LogFile   string
	LogLevel  string
	// LibcniResultsDir is the runtime's libcni cache dir of results
	// (libcniResultsDir, set by catena-agent): a DEL that finds no record
	// adopts the primary's entry of the attachment there. "": none.
	LibcniResultsDir string
	// LibcniNetworkDirPlugins are the raw configs of the last delegates
	// that came from the primary's network dir (<conf dir>/<network>/*.conf,
	// which libcni v1.3 appends to a conflist's plugins), as many as
	// libcniNetworkDirPlugins says (set by catena-agent). The runtime's
	// libcni cache entry of a primary-made attachment holds the file's list
	// only, so a DEL adopting it appends these, as the agent's adoption
	// does.
	LibcniNetworkDirPlugins [][]byte
	// RuntimeConfig is what the runtime injected for Catena's capabilities.
	RuntimeConfig map[string]json.RawMessage
	// PrevResult is the raw prevResult Catena received, if any.
	PrevResult json.RawMessage
	// ValidAttachments is cni.dev/valid-attachments, passed on GC.
	ValidAttachments json.RawMessage
	// Attachments is cni.dev/attachments, the spec's first name of the
	// same list, which libcni sends beside it (parseValid reads both).
	Attachments json.RawMessage
	Delegates   []Delegate
}

// Delegate is one link of the chain, as configured.
type Delegate struct {
	Index int
	Type  string
	// CNIVersion is the version the delegate is called at. With Auto it is
	// "" until the engine resolves it from the binary's VERSION (auto.go).
	CNIVersion string
	// Auto: the config says "cniVersion": "auto".
	Auto bool
	// probed is the VERSION answer CNIVersion was resolved from.
	probed *Probed
	// Capabilities the delegate declares; only these runtimeConfig keys
	// reach it.
	Capabilities map[string]bool
	// fields holds every field of the delegate's config verbatim, so that
	// unknown fields pass through unchanged.
	fields map[string]json.RawMessage
	// runtimeConfig is fields["runtimeConfig"] decoded (nil if absent): the
	// base into which the runtime's keys are injected.
	runtimeConfig map[string]json.RawMessage
}

// String names the delegate in messages: "delegate 1 (portmap)".
func (d Delegate) String() string {
	return fmt.Sprintf("delegate %d (%s)", d.Index, d.Type)
}

type rawConf struct {
	CNIVersion       string                     `json:"cniVersion"`
	Name             string                     `json:"name"`
	Type             string                     `json:"type"`
	CacheDir         string                     `json:"cacheDir"`
	LockTimeout      string                     `json:"lockTimeout"`
	DelegateTimeout  string                     `json:"delegateTimeout"`
	SlowThreshold    string                     `json:"slowThreshold"`
	GCGracePeriod    string                     `json:"gcGracePeriod"`
	DisableGC        bool                       `json:"disableGC"`
	LogFile          string                     `json:"logFile"`
	LogLevel         string                     `json:"logLevel"`
	LibcniResultsDir string                     `json:"libcniResultsDir"`
	LibcniNetworkDir int                        `json:"libcniNetworkDirPlugins"`
	RuntimeConfig    map[string]json.RawMessage `json:"runtimeConfig"`
	PrevResult       json.RawMessage            `json:"prevResult"`
	ValidAttachments json.RawMessage            `json:"cni.dev/valid-attachments"`
	Attachments      json.RawMessage            `json:"cni.dev/attachments"`
	Delegates        []json.RawMessage          `json:"delegates"`
}

// ParseConfig parses and validates Catena's config. Every error is a
// *types.Error with the spec's code and names the offending field.
func ParseConfig(data []byte) (*NetConf, error) {
	var raw rawConf
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, fmt.Sprintf("catena: decoding network config: %v", err), "")
	}
	if raw.Name == "" {
		return nil, configError("name", "missing")
	}
	if err := utils.ValidateNetworkName(raw.Name); err != nil {
		return nil, configError("name", fmt.Sprintf("%q: %s", raw.Name, err.Msg))
	}
	if raw.CNIVersion == "" {
		raw.CNIVersion = "0.1.0" // the spec's default for a missing version
	}
	if err := checkVersion("cniVersion", raw.CNIVersion); err != nil {
		return nil, err
	}
	conf := &NetConf{
		CNIVersion:       raw.CNIVersion,
		Name:             raw.Name,
		CacheDir:         raw.CacheDir,
		LogFile:          raw.LogFile,
		LogLevel:         raw.LogLevel,
		RuntimeConfig:    raw.RuntimeConfig,
		ValidAttachments: raw.ValidAttachments,
		Attachments:      raw.Attachments,
	}
	if len(raw.PrevResult) > 0 && string(raw.PrevResult) != "null" {
		conf.PrevResult = raw.PrevResult
	}
	if conf.CacheDir == "" {
		conf.CacheDir = DefaultCacheDir
	}
	if !filepath.IsAbs(conf.CacheDir) {
		return nil, configError("cacheDir", fmt.Sprintf("%q is not an absolute path", conf.CacheDir))
	}
	if raw.LibcniResultsDir != "" && !filepath.IsAbs(raw.LibcniResultsDir) {
		return nil, configError("libcniResultsDir", fmt.Sprintf("%q is not an absolute path", raw.LibcniResultsDir))
	}
	conf.LibcniResultsDir = raw.LibcniResultsDir
	var err error
	if conf.LockTimeout, err = parseDuration("lockTimeout", raw.LockTimeout, DefaultLockTimeout); err != nil {
		return nil, err
	}
	if conf.DelegateTimeout, err = parseDuration("delegateTimeout", raw.DelegateTimeout, DefaultDelegateTimeout); err != nil {
		return nil, err
	}
	if conf.SlowThreshold, err = parseDuration("slowThreshold", raw.SlowThreshold, DefaultSlowThreshold); err != nil {
		return nil, err
	}
	if conf.GCGracePeriod, err = parseDuration("gcGracePeriod", raw.GCGracePeriod, DefaultGCGracePeriod); err != nil {
		return nil, err
	}
	conf.DisableGC = raw.DisableGC
	if len(raw.Delegates) == 0 {
		return nil, configError("delegates", "missing or empty: catena needs at least one delegate")
	}
	if len(raw.Delegates) > MaxDelegates {
		return nil, configError("delegates", fmt.Sprintf("%d delegates, at most %d", len(raw.Delegates), MaxDelegates))
	}
	for i, rd := range raw.Delegates {
		d, err := parseDelegate(i, rd, conf.CNIVersion)
		if err != nil {
			return nil, err
		}
		conf.Delegates = append(conf.Delegates, d)
	}
	if raw.LibcniNetworkDir < 0 || raw.LibcniNetworkDir > len(raw.Delegates) {
		return nil, configError("libcniNetworkDirPlugins", fmt.Sprintf("%d: not between 0 and the %d delegates", raw.LibcniNetworkDir, len(raw.Delegates)))
	}
	for _, rd := range raw.Delegates[len(raw.Delegates)-raw.LibcniNetworkDir:] {
		conf.LibcniNetworkDirPlugins = append(conf.LibcniNetworkDirPlugins, []byte(rd))
	}
	return conf, nil
}

func parseDelegate(i int, data json.RawMessage, parentVersion string) (Delegate, error) {
	field := fmt.Sprintf("delegates[%d]", i)
	d := Delegate{Index: i, CNIVersion: parentVersion}
	if err := json.Unmarshal(data, &d.fields); err != nil || d.fields == nil {
		return d, configError(field, "not a JSON object")
	}
	typ, ok := d.fields["type"]
	if !ok {
		return d, configError(field+".type", "missing")
	}
	if err := json.Unmarshal(typ, &d.Type); err != nil {
		return d, configError(field+".type", "not a string")
	}
	if err := invoke.ValidateType(d.Type); err != nil {
		return d, configError(field+".type", err.Error())
	}
	if v, ok := d.fields["cniVersion"]; ok {
		if err := json.Unmarshal(v, &d.CNIVersion); err != nil {
			return d, configError(field+".cniVersion", "not a string")
		}
		if d.CNIVersion == AutoVersion {
			d.CNIVersion, d.Auto = "", true
		} else if err := checkVersion(field+".cniVersion", d.CNIVersion); err != nil {
			return d, err
		}
	}
	if rc, ok := d.fields["runtimeConfig"]; ok {
		if err := json.Unmarshal(rc, &d.runtimeConfig); err != nil || d.runtimeConfig == nil {
			return d, configError(field+".runtimeConfig", "not an object")
		}
	}
	if c, ok := d.fields["capabilities"]; ok {
		if err := json.Unmarshal(c, &d.Capabilities); err != nil {
			return d, configError(field+".capabilities", "not an object of booleans")
		}
	}
	if n, ok := d.fields["delegates"]; ok && len(n) > 0 && d.Type == "catena" {
		return d, configError(field, "a catena delegate may not nest another catena chain")
	}
	return d, nil
}

// checkVersion accepts only a CNI version whose results Catena can convert
// to and from: one of the spec's releases (version.All).
func checkVersion(field, v string) error {
	if _, _, _, err := version.ParseVersion(v); err != nil {
		return types.NewError(types.ErrIncompatibleCNIVersion, fmt.Sprintf("catena: %s %q: %v", field, v, err), "")
	}
	if !slices.Contains(version.All.SupportedVersions(), v) {
		return types.NewError(types.ErrIncompatibleCNIVersion, fmt.Sprintf("catena: %s %q: not a CNI version catena can convert results to (%s)",
			field, v, strings.Join(version.All.SupportedVersions(), ", ")), "")
	}
	return nil
}

func parseDuration(field, s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, configError(field, fmt.Sprintf("%q is not a duration (e.g. \"30s\"): %v", s, err))
	}
	if d <= 0 {
		return 0, configError(field, fmt.Sprintf("%q must be positive", s))
	}
	return d, nil
}

func configError(field, msg string) *types.Error {
	return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("catena: invalid config: %s: %s", field, msg), "")
}

// Config renders the delegate's network config for one call: its own fields,
// plus the inherited name and cniVersion and the runtimeConfig keys its
// capabilities declare. prevResult is added by the caller.
func (d Delegate) Config(name string, runtimeConfig map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(d.fields)+3)
	for k, v := range d.fields {
		out[k] = v
	}
	var err error
	if out["name"], err = json.Marshal(name); err != nil {
		return nil, fmt.Errorf("%s: encoding name: %w", d, err)
	}
	if d.Auto && d.CNIVersion == "" {
		return nil, fmt.Errorf("%s: cniVersion %q not resolved from its VERSION", d, AutoVersion)
	}
	if out["cniVersion"], err = json.Marshal(d.CNIVersion); err != nil {
		return nil, fmt.Errorf("%s: encoding cniVersion: %w", d, err)
	}
	rc := maps.Clone(d.runtimeConfig)
	if rc == nil {
		rc = map[string]json.RawMessage{}
	}
	injected := false
	for key, val := range runtimeConfig {
		if d.Capabilities[key] {
			rc[key] = val
			injected = true
		}
	}
	if injected {
		if out["runtimeConfig"], err = json.Marshal(rc); err != nil {
			return nil, fmt.Errorf("%s: encoding runtimeConfig: %w", d, err)
		}
	}
	return out, nil
}
