package libcnientry

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types/create"

	"github.com/catena-cni/catena/cache"
)

// ErrCatenaOwn marks an entry made through Catena itself: Catena keeps its
// own record of it, and adopting it could resurrect a record that a DEL has
// just removed (libcni drops its cache file only after the DEL). Such an
// entry is skipped quietly.
var ErrCatenaOwn = errors.New("made through catena, which keeps its own record")

// Record renders data, the content of the cache file name that libcni
// wrote at modTime, as the record a Catena ADD on network would have left
// (see buildRecord), dirPlugins being the network dir's plugins. An error
// is a reason not to adopt the file: it is not a libcni entry of network
// named after its own content and holding a result; its record could not
// be torn down (a delegate type that is not a plain binary name, a NUL in
// what becomes the environment, a result that does not convert); or it
// was made through Catena itself (ErrCatenaOwn).
func Record(name string, data []byte, modTime time.Time, network string, dirPlugins [][]byte) (*cache.Record, error) {
	e, err := parseEntry(name, data, modTime, network)
	if err != nil {
		return nil, err
	}
	return buildRecord(e, dirPlugins)
}

// buildRecord renders e as the record a Catena ADD would have left: every
// delegate added, each with the config libcni sent it, the last one with
// the final result. The cached conflist is used, not today's, followed by
// dirPlugins, the network dir's plugins libcni v1.3 ran after it unless it
// sets loadOnlyInlinedPlugins (libcni caches the file's list without them).
func buildRecord(e *entry, dirPlugins [][]byte) (*cache.Record, error) {
	list, err := libcni.NetworkConfFromBytes(e.Config)
	if err != nil {
		return nil, fmt.Errorf("cached config: %w", err)
	}
	if !list.LoadOnlyInlinedPlugins {
		for i, raw := range dirPlugins {
			p, err := libcni.NetworkPluginConfFromBytes(raw)
			if err != nil {
				return nil, fmt.Errorf("network dir plugin %d: %w", i, err)
			}
			list.Plugins = append(list.Plugins, p)
		}
	}
	key := cache.Key{Network: list.Name, ContainerID: e.ContainerID, IfName: e.IfName}
	switch {
	case list.Name != e.NetworkName:
		return nil, fmt.Errorf("cached config is of network %q, not %q", list.Name, e.NetworkName)
	case len(list.Plugins) == 0:
		return nil, errors.New("cached config has no inline plugins, and the network dir none")
	}
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("invalid attachment: %w", err)
	}
	if err := checkEnv(e); err != nil {
		return nil, err
	}
	result, err := convertResult(e.Result, list.CNIVersion)
	if err != nil {
		return nil, err
	}
	rec := &cache.Record{
		Key:        key,
		Phase:      cache.PhaseComplete,
		CNIVersion: list.CNIVersion,
		NetNS:      e.NetNS,
		Args:       cniArgs(e.CNIArgs),
		Result:     result,
		Created:    e.modTime,
	}
	for i, p := range list.Plugins {
		step, err := buildStep(i, list, p, e)
		if err != nil {
			return nil, err
		}
		rec.Steps = append(rec.Steps, step)
	}
	rec.Steps[len(rec.Steps)-1].Result = result
	return rec, nil
}

func buildStep(i int, list *libcni.NetworkConfigList, p *libcni.PluginConfig, e *entry) (cache.Step, error) {
	typ := p.Network.Type
	if err := checkType(typ); err != nil {
		return cache.Step{}, fmt.Errorf("plugin %d: %w", i, err)
	}
	if typ == "catena" {
		return cache.Step{}, ErrCatenaOwn
	}
	conf, err := addConfig(list.Name, list.CNIVersion, p, e.CapabilityArgs)
	if err != nil {
		return cache.Step{}, fmt.Errorf("plugin %d (%s): %w", i, typ, err)
	}
	return cache.Step{
		Index: i, Type: typ, CNIVersion: list.CNIVersion, Config: conf, State: cache.StepAdded,
		Started: e.modTime, Finished: e.modTime,
	}, nil
}

// addConfig is the config libcni sent the plugin on ADD, without
// prevResult: its buildOneConfig (name and the list's cniVersion injected)
// then injectRuntimeConfig (the capability args the plugin declares, as
// the whole runtimeConfig).
func addConfig(name, cniVersion string, p *libcni.PluginConfig, capArgs map[string]json.RawMessage) (json.RawMessage, error) {
	conf, err := libcni.InjectConf(p, map[string]any{"name": name, "cniVersion": cniVersion})
	if err != nil {
		return nil, err
	}
	rc := map[string]any{}
	for capability, supported := range conf.Network.Capabilities {
		if v, ok := capArgs[capability]; ok && supported {
			rc[capability] = v
		}
	}
	if len(rc) > 0 {
		if conf, err = libcni.InjectConf(conf, map[string]any{"runtimeConfig": rc}); err != nil {
			return nil, err
		}
	}
	return conf.Bytes, nil
}

// checkType accepts only a plain binary name, as Catena resolves a
// delegate's type inside CNI_PATH and nowhere else.
func checkType(t string) error {
	switch {
	case t == "" || t == "." || t == "..":
		return fmt.Errorf("type %q is not a plugin name", t)
	case strings.ContainsAny(t, "/\\\x00"):
		return fmt.Errorf("type %q is not a plain binary name", t)
	}
	return nil
}

// convertResult renders the cached result in the list's version, as libcni
// hands it to every plugin's DEL.
func convertResult(raw json.RawMessage, want string) (json.RawMessage, error) {
	r, err := create.CreateFromBytes(raw)
	if err != nil {
		return nil, fmt.Errorf("cached result: %w", err)
	}
	conv, err := r.GetAsVersion(want)
	if err != nil {
		return nil, fmt.Errorf("cached result: converting from %s to %s: %w", r.Version(), want, err)
	}
	out, err := json.Marshal(conv)
	if err != nil {
		return nil, fmt.Errorf("cached result: encoding: %w", err)
	}
	return out, nil
}

// checkEnv refuses what a teardown could not pass to a delegate: the
// netns path and CNI_ARGS become environment variables, which cannot hold
// NUL, so such a record would fail every DEL forever.
func checkEnv(e *entry) error {
	if strings.ContainsRune(e.NetNS, 0) {
		return errors.New("cached netns holds a NUL byte")
	}
	for _, kv := range e.CNIArgs {
		if strings.ContainsRune(kv[0], 0) || strings.ContainsRune(kv[1], 0) {
			return errors.New("cached CNI_ARGS hold a NUL byte")
		}
	}
	return nil
}

// cniArgs renders libcni's args as CNI_ARGS, as its invoke package does.
func cniArgs(args [][2]string) string {
	parts := make([]string, len(args))
	for i, kv := range args {
		parts[i] = kv[0] + "=" + kv[1]
	}
	return strings.Join(parts, ";")
}
