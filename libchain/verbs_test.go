package libchain

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckPrevResultPerVersion: CHECK converts the recorded result once per
// delegate version and reuses it; every delegate still gets the stdin it
// would get on its own (withPrevResult), byte for byte, with prevResult in
// its own version, whatever the order of the versions in the chain.
func TestCheckPrevResultPerVersion(t *testing.T) {
	tests := []struct {
		name      string
		delegates []string
		wantSeen  []string
		wantVer   map[string]string // delegate type -> prevResult's cniVersion
	}{
		{name: "one version", delegates: []string{dIPAM, dPort, dTune},
			wantSeen: []string{"CHECK ipam", "CHECK portmap", "CHECK tuning"},
			wantVer:  map[string]string{"ipam": "1.1.0", "portmap": "1.1.0", "tuning": "1.1.0"}},
		{name: "versions interleaved", delegates: []string{dIPAM, `{"type":"portmap","cniVersion":"0.4.0"}`,
			`{"type":"tuning","cniVersion":"0.3.1"}`, dOther, `{"type":"bandwidth","cniVersion":"0.4.0"}`, `{"type":"firewall","cniVersion":"1.0.0"}`},
			wantSeen: []string{"CHECK ipam", "CHECK portmap", "CHECK other", "CHECK bandwidth", "CHECK firewall"},
			wantVer:  map[string]string{"ipam": "1.1.0", "portmap": "0.4.0", "other": "1.1.0", "bandwidth": "0.4.0", "firewall": "1.0.0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness()
			r := req(chainConf(t, "1.1.0", tc.delegates...), "c1")
			_, err := h.eng.Add(context.Background(), r)
			require.NoError(t, err)
			rec := h.record(t, r)
			require.NotEmpty(t, rec.Result)
			h.exec.reset()

			require.NoError(t, h.eng.Check(context.Background(), r))
			assert.Equal(t, tc.wantSeen, h.exec.seen(), "0.3.1 has no CHECK")
			for _, s := range rec.Steps {
				calls := h.exec.callsOf("CHECK", s.Type)
				if _, checked := tc.wantVer[s.Type]; !checked {
					assert.Empty(t, calls, s.Type)
					continue
				}
				require.Len(t, calls, 1, s.Type)
				want, err := withPrevResult(s.Config, s.CNIVersion, rec.Result)
				require.NoError(t, err)
				assert.Equal(t, string(want), string(calls[0].Stdin), s.Type)
				assert.Equal(t, tc.wantVer[s.Type], calls[0].prevResult()["cniVersion"], s.Type)
			}
		})
	}
}
