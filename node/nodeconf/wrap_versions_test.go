package nodeconf

import (
	"encoding/json"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain"
)

// TestWrapDelegateVersions: with auto every delegate's cniVersion is
// "auto" and the file offers 1.1.0 in cniVersions besides the primary's
// versions, its cniVersion unchanged; libcni v1.3 then loads it at 1.1.0.
// With primary (and by default in the package) the versions are the
// primary's as written.
func TestWrapDelegateVersions(t *testing.T) {
	flannel := `{"name":"cbr0","cniVersion":"0.3.1","plugins":[{"type":"flannel","delegate":{"hairpinMode":true,"isDefaultGateway":true}},{"type":"portmap","capabilities":{"portMappings":true}}]}`
	for name, tc := range map[string]struct {
		primary      string
		mode         DelegateVersionsMode
		wantVersion  string
		wantVersions []string // nil: no cniVersions
		wantLoaded   string   // the version libcni v1.3 loads the file at
		wantDelegate string   // each delegate's cniVersion, "" for none
	}{
		"flannel 0.3.1, auto": {primary: flannel, mode: DelegateVersionsAuto,
			wantVersion: "0.3.1", wantVersions: []string{"0.3.1", "1.1.0"}, wantLoaded: "1.1.0", wantDelegate: "auto"},
		"flannel 0.3.1, primary": {primary: flannel, mode: DelegateVersionsPrimary,
			wantVersion: "0.3.1", wantLoaded: "0.3.1"},
		"flannel 0.3.1, default": {primary: flannel,
			wantVersion: "0.3.1", wantLoaded: "0.3.1"},
		"cniVersions kept, 1.1.0 appended": {mode: DelegateVersionsAuto,
			primary:     `{"name":"n","cniVersion":"0.4.0","cniVersions":["0.4.0","1.0.0"],"plugins":[{"type":"bridge","cniVersion":"0.4.0"}]}`,
			wantVersion: "0.4.0", wantVersions: []string{"0.4.0", "1.0.0", "1.1.0"}, wantLoaded: "1.1.0", wantDelegate: "auto"},
		"already 1.1.0": {mode: DelegateVersionsAuto,
			primary:     `{"name":"n","cniVersion":"1.1.0","plugins":[{"type":"bridge"}]}`,
			wantVersion: "1.1.0", wantLoaded: "1.1.0", wantDelegate: "auto"},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := ParsePrimary("10-x.conflist", []byte(tc.primary))
			require.NoError(t, err)
			out, err := Wrap(p, CatenaOptions{DelegateVersions: tc.mode})
			require.NoError(t, err)
			var got struct {
				CNIVersion  string   `json:"cniVersion"`
				CNIVersions []string `json:"cniVersions"`
				Plugins     []struct {
					Delegates []map[string]any `json:"delegates"`
				} `json:"plugins"`
			}
			require.NoError(t, json.Unmarshal(out, &got))
			assert.Equal(t, tc.wantVersion, got.CNIVersion, "cniVersion stays the primary's: an old libcni refuses one it does not know")
			assert.Equal(t, tc.wantVersions, got.CNIVersions)
			for _, d := range got.Plugins[0].Delegates {
				v, _ := d["cniVersion"].(string)
				assert.Equal(t, tc.wantDelegate, v)
				assert.NotContains(t, d, "name")
			}
			list, err := libcni.NetworkConfFromBytes(out)
			require.NoError(t, err)
			assert.Equal(t, tc.wantLoaded, list.CNIVersion)
			conf, err := libchain.CatenaConf(out)
			require.NoError(t, err)
			for _, d := range conf.Delegates {
				assert.Equal(t, tc.wantDelegate == "auto", d.Auto)
			}
		})
	}
	assert.Error(t, Config{ConfDir: "/etc/cni/net.d", ConfName: "00-catena.conflist", Catena: CatenaOptions{DelegateVersions: "newest"}}.Validate())
}
