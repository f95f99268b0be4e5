package nodeconf

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain"
)

// FuzzParsePrimaryWrap feeds arbitrary conf-dir files through what the
// agent does with a primary: nothing panics, and whatever is wrapped is a
// config the catena plugin accepts, carries the primary's plugins verbatim
// as its delegates, and is itself refused as a primary (no nesting).
func FuzzParsePrimaryWrap(f *testing.F) {
	f.Add("10-net.conflist", []byte(`{"cniVersion":"1.0.0","name":"podnet","plugins":[{"type":"bridge"},{"type":"portmap","capabilities":{"portMappings":true}}]}`))
	f.Add("10-net.conf", []byte(`{"cniVersion":"0.4.0","name":"podnet","type":"bridge","ipam":{"type":"host-local"}}`))
	f.Add("10-net.conflist", []byte(`{"cniVersions":["1.0.0","1.1.0"],"name":"n","disableGC":true,"plugins":[{"type":"tuning"}]}`))
	f.Add("10-net.conflist", []byte(`{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"../bridge"}]}`))
	f.Add("10-net.conflist", []byte(`{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"catena"}]}`))
	f.Add("10-net.json", []byte(`{"name":"n","plugins":[`))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		p, err := ParsePrimary(name, data)
		if err != nil {
			return
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
			require.JSONEq(t, string(p.plugins[i]), string(gen.Plugins[0].Delegates[i]), "delegate %d not verbatim", i)
		}
		_, err = ParsePrimary(name, out)
		require.Error(t, err, "a generated config taken as a primary")
	})
}
