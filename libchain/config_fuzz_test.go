package libchain

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain/invoke"
)

// FuzzParseConfig checks that ParseConfig never panics, that it refuses
// with a CNI error of the spec's codes, and that a config it accepts can
// be run: every delegate's config renders (with the runtimeConfig the
// runtime injected) into JSON that carries its type, the network name and
// its cniVersion. `go test` replays testdata/fuzz/FuzzParseConfig.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"cniVersion":"1.1.0","name":"podnet","type":"catena","cacheDir":"/var/lib/cni/catena",
	  "capabilities":{"portMappings":true},"runtimeConfig":{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]},
	  "delegates":[{"type":"bridge","ipam":{"type":"host-local"}},{"type":"portmap","capabilities":{"portMappings":true}},{"type":"tuning","cniVersion":"0.4.0"}]}`))
	f.Add([]byte(`{"name":"n","delegates":[{"type":"x","runtimeConfig":{"a":1},"capabilities":{"b":true}}],"runtimeConfig":{"b":2}}`))
	f.Add([]byte(`{"name":"n","lockTimeout":"1ms","delegateTimeout":"2h","gcGracePeriod":"0s","delegates":[{"type":"x"}]}`))
	f.Add([]byte(`{"name":"n","delegates":[{"type":"catena","delegates":[{"type":"x"}]}]}`))
	f.Add([]byte(`{"name":"n","prevResult":null,"delegates":[{"type":"x","cniVersion":"0.1.0"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		conf, err := ParseConfig(data)
		if err != nil {
			var te *types.Error
			if !errors.As(err, &te) {
				t.Fatalf("not a CNI error: %T %v", err, err)
			}
			switch te.Code {
			case types.ErrIncompatibleCNIVersion, types.ErrDecodingFailure, types.ErrInvalidNetworkConfig:
			default:
				t.Fatalf("code %d: %v", te.Code, err)
			}
			if !strings.HasPrefix(te.Msg, "catena: ") {
				t.Fatalf("message %q does not say catena", te.Msg)
			}
			return
		}
		checkAccepted(t, conf)
	})
}

// checkAccepted checks what ParseConfig promises of a config it accepts.
func checkAccepted(t *testing.T, conf *NetConf) {
	t.Helper()
	if err := utils.ValidateNetworkName(conf.Name); err != nil {
		t.Fatalf("accepted network name %q: %v", conf.Name, err)
	}
	if _, _, _, err := version.ParseVersion(conf.CNIVersion); err != nil {
		t.Fatalf("accepted cniVersion %q", conf.CNIVersion)
	}
	if !filepath.IsAbs(conf.CacheDir) {
		t.Fatalf("accepted cacheDir %q", conf.CacheDir)
	}
	if conf.LockTimeout <= 0 || conf.DelegateTimeout <= 0 || conf.GCGracePeriod <= 0 {
		t.Fatalf("accepted durations %v %v %v", conf.LockTimeout, conf.DelegateTimeout, conf.GCGracePeriod)
	}
	if len(conf.Delegates) == 0 || len(conf.Delegates) > MaxDelegates {
		t.Fatalf("accepted %d delegates", len(conf.Delegates))
	}
	for i, d := range conf.Delegates {
		if d.Index != i || invoke.ValidateType(d.Type) != nil {
			t.Fatalf("delegate %d: index %d, type %q", i, d.Index, d.Type)
		}
		if !slices.Contains(version.All.SupportedVersions(), d.CNIVersion) {
			t.Fatalf("%s: accepted cniVersion %q, which catena cannot convert to", d, d.CNIVersion)
		}
		fields, err := d.Config(conf.Name, conf.RuntimeConfig)
		if err != nil {
			t.Fatalf("accepted %s, whose config cannot be rendered: %v", d, err)
		}
		raw, err := json.Marshal(fields)
		if err != nil {
			t.Fatalf("%s: config does not encode: %v", d, err)
		}
		var back struct {
			Type       string `json:"type"`
			Name       string `json:"name"`
			CNIVersion string `json:"cniVersion"`
		}
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatalf("%s: rendered config %s: %v", d, raw, err)
		}
		if back.Type != d.Type || back.Name != conf.Name || back.CNIVersion != d.CNIVersion {
			t.Fatalf("%s: rendered %+v", d, back)
		}
	}
}

// TestDelegateRuntimeConfigMustBeAnObject: found by FuzzParseConfig. A
// delegate's static runtimeConfig that is not an object was accepted, and
// failed every ADD later; a null one, with a capability the runtime
// injects, made Delegate.Config panic (a nil map), on ADD and on the
// best-effort DEL of a corrupt record.
func TestDelegateRuntimeConfigMustBeAnObject(t *testing.T) {
	for _, rc := range []string{`null`, `5`, `"x"`, `[]`} {
		_, err := ParseConfig([]byte(`{"name":"n","runtimeConfig":{"b":1},
		  "delegates":[{"type":"x","runtimeConfig":` + rc + `,"capabilities":{"b":true}}]}`))
		var te *types.Error
		require.True(t, errors.As(err, &te), "runtimeConfig %s: %v", rc, err)
		assert.Equal(t, uint(types.ErrInvalidNetworkConfig), te.Code)
		assert.Contains(t, te.Msg, "delegates[0].runtimeConfig: not an object")
	}
	conf, err := ParseConfig([]byte(`{"name":"n","runtimeConfig":{"b":1},
	  "delegates":[{"type":"x","runtimeConfig":{"a":2},"capabilities":{"b":true}}]}`))
	require.NoError(t, err)
	d := conf.Delegates[0]
	d.runtimeConfig = nil // what a null would decode to, had ParseConfig let it through
	var fields map[string]json.RawMessage
	require.NotPanics(t, func() { fields, err = d.Config(conf.Name, conf.RuntimeConfig) })
	require.NoError(t, err)
	assert.JSONEq(t, `{"b":1}`, string(fields["runtimeConfig"]))
}
