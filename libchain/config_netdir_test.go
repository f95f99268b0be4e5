package libchain

import (
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseLibcniNetworkDirPlugins: libcniNetworkDirPlugins names the last
// delegates, whose raw configs a DEL that adopts appends to the primary's
// cached list; a count outside the chain is refused with code 7.
func TestParseLibcniNetworkDirPlugins(t *testing.T) {
	const head = `{"cniVersion":"1.1.0","name":"podnet","type":"catena","libcniResultsDir":"/var/lib/cni/results",`
	const delegates = `"delegates":[{"type":"bridge"},{"type":"tuning","mtu":1280},{"type":"portmap"}]`
	tests := []struct {
		name     string
		count    string
		want     []string
		wantCode uint
	}{
		{name: "absent", count: ``, want: nil},
		{name: "zero", count: `"libcniNetworkDirPlugins":0,`, want: nil},
		{name: "last two", count: `"libcniNetworkDirPlugins":2,`, want: []string{`{"type":"tuning","mtu":1280}`, `{"type":"portmap"}`}},
		{name: "all", count: `"libcniNetworkDirPlugins":3,`, want: []string{`{"type":"bridge"}`, `{"type":"tuning","mtu":1280}`, `{"type":"portmap"}`}},
		{name: "more than the chain", count: `"libcniNetworkDirPlugins":4,`, wantCode: types.ErrInvalidNetworkConfig},
		{name: "negative", count: `"libcniNetworkDirPlugins":-1,`, wantCode: types.ErrInvalidNetworkConfig},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conf, err := ParseConfig([]byte(head + tc.count + delegates + `}`))
			if tc.wantCode != 0 {
				var e *types.Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, tc.wantCode, e.Code)
				assert.Contains(t, e.Msg, "libcniNetworkDirPlugins")
				return
			}
			require.NoError(t, err)
			var got []string
			for _, raw := range conf.LibcniNetworkDirPlugins {
				got = append(got, string(raw))
			}
			assert.Equal(t, tc.want, got)
		})
	}
}
