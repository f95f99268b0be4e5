package nodeconf

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain"
)

// FuzzParsePrimaryWrap feeds arbitrary conf-dir files through what the
// agent does with a primary: nothing panics, and whatever is wrapped embeds
// no catena at any depth (checked here without a bound), is one plugin if
// the file is not a .conflist (as the runtimes read it), is a config the
// catena plugin accepts, carries the primary's plugins verbatim (but for
// the name and cniVersion libcni overrides) as its delegates, and is
// itself refused as a primary (no nesting).
func FuzzParsePrimaryWrap(f *testing.F) {
	f.Add("10-net.conflist", []byte(`{"cniVersion":"1.0.0","name":"podnet","plugins":[{"type":"bridge"},{"type":"portmap","capabilities":{"portMappings":true}}]}`))
	f.Add("10-net.conf", []byte(`{"cniVersion":"0.4.0","name":"podnet","type":"bridge","ipam":{"type":"host-local"}}`))
	f.Add("10-net.conflist", []byte(`{"cniVersions":["1.0.0","1.1.0"],"name":"n","disableGC":true,"plugins":[{"type":"tuning"}]}`))
	f.Add("10-net.conflist", []byte(`{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"../bridge"}]}`))
	f.Add("10-net.conflist", []byte(`{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"catena"}]}`))
	f.Add("10-net.json", []byte(`{"name":"n","plugins":[`))
	f.Add("00-multus.conf", []byte(`{"cniVersion":"0.3.1","name":"multus-cni-network","type":"multus","kubeconfig":"/etc/cni/net.d/multus.d/multus.kubeconfig",`+
		`"delegates":[{"cniVersion":"1.0.0","name":"podnet","catena.dev/generated":{"by":"catena-agent","source":"10-p.conflist"},"plugins":[{"type":"catena","delegates":[{"type":"bridge"}]}]}]}`))
	f.Add("00-multus.conf", []byte(`{"cniVersion":"0.3.1","name":"multus-cni-network","type":"multus","delegates":[{"cniVersion":"0.3.1","name":"podnet","plugins":[{"type":"bridge","ipam":{"type":"host-local","ranges":[[{"subnet":"10.1.0.0/16"}]]}}]}]}`))
	f.Add("10-net.conf", []byte(`{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge"}]}`))
	f.Add("10-net.conf", []byte(`{"cniVersion":"1.0.0","name":"n","type":"ptp","plugins":[{"type":"catena"}]}`))
	f.Add("10-net.conflist", []byte(`{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"x","inner":{"TYPE":"catena"}}]}`))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		p, err := ParsePrimary(name, data)
		if err != nil {
			return
		}
		for i, pl := range p.plugins {
			require.False(t, embedsCatena(t, pl), "plugin %d embeds catena: %s", i, pl)
		}
		if !strings.HasSuffix(name, ".conflist") {
			require.Len(t, p.plugins, 1, "a .conf or .json is one plugin")
			require.JSONEq(t, string(data), string(p.plugins[0]))
		}
		out, err := Wrap(p, CatenaOptions{CacheDir: "/var/lib/cni/catena", LockTimeout: time.Second})
		if err != nil {
			return
		}
		_, err = libchain.CatenaConf(out)
		require.NoError(t, err, "a wrapped config catena refuses")
		var gen struct {
			Name    string `json:"name"`
			Plugins []struct {
				Type      string            `json:"type"`
				Delegates []json.RawMessage `json:"delegates"`
			} `json:"plugins"`
		}
		require.NoError(t, json.Unmarshal(out, &gen))
		require.Equal(t, p.List.Name, gen.Name)
		require.Len(t, gen.Plugins, 1)
		require.Equal(t, "catena", gen.Plugins[0].Type)
		require.Len(t, gen.Plugins[0].Delegates, len(p.plugins))
		for i := range p.plugins {
			var want map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(p.plugins[i], &want))
			delete(want, "name") // libcni overrides both in every plugin
			delete(want, "cniVersion")
			wantJSON, err := json.Marshal(want)
			require.NoError(t, err)
			require.JSONEq(t, string(wantJSON), string(gen.Plugins[0].Delegates[i]), "delegate %d not verbatim", i)
		}
		_, err = ParsePrimary(name, out)
		require.Error(t, err, "a generated config taken as a primary")
	})
}

// embedsCatena reports, without a depth bound, whether raw holds an object
// with a type key (any case) of "catena" or a generated key key.
func embedsCatena(t *testing.T, raw json.RawMessage) bool {
	var v any
	require.NoError(t, json.Unmarshal(raw, &v))
	var walk func(v any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if strings.EqualFold(k, GeneratedKey) || (strings.EqualFold(k, "type") && e == "catena") || walk(e) {
					return true
				}
			}
		case []any:
			for _, e := range x {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}
