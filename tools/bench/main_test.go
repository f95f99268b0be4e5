package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func durs(ms ...int) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = time.Duration(m) * time.Millisecond
	}
	return out
}

func TestStats(t *testing.T) {
	tests := []struct {
		name      string
		in        []time.Duration
		wantMed   time.Duration
		wantP95   time.Duration
		unchanged bool
	}{
		{name: "empty", in: nil},
		{name: "one", in: durs(7), wantMed: 7 * time.Millisecond, wantP95: 7 * time.Millisecond},
		{name: "odd unsorted", in: durs(5, 1, 3), wantMed: 3 * time.Millisecond, wantP95: 5 * time.Millisecond},
		{name: "even", in: durs(4, 1, 3, 2), wantMed: 2500 * time.Microsecond, wantP95: 4 * time.Millisecond},
		{
			name:    "twenty",
			in:      durs(20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1),
			wantMed: 10500 * time.Microsecond, wantP95: 19 * time.Millisecond,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			orig := append([]time.Duration(nil), tc.in...)
			assert.Equal(t, tc.wantMed, median(tc.in))
			assert.Equal(t, tc.wantP95, percentile(tc.in, 95))
			assert.Equal(t, orig, tc.in, "input must not be reordered")
		})
	}
}

func TestRenderConflist(t *testing.T) {
	tests := []struct {
		name       string
		variant    string
		wantTypes  []string
		wantCatena bool
	}{
		{name: "catena wraps the delegates", variant: "catena", wantTypes: []string{"catena"}, wantCatena: true},
		{name: "plain lists the plugins", variant: "plain", wantTypes: []string{"bridge", "portmap", "tuning"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := &variant{name: tc.variant, wrapped: tc.wantCatena, network: "net-" + tc.variant, bridge: "br0",
				subnet: "10.251.1.0/24", dir: "/tmp/x", cache: "/tmp/x/cache"}
			var got struct {
				CNIVersion string `json:"cniVersion"`
				Name       string `json:"name"`
				Plugins    []struct {
					Type      string            `json:"type"`
					CacheDir  string            `json:"cacheDir"`
					Delegates []json.RawMessage `json:"delegates"`
					IPAM      struct {
						DataDir string `json:"dataDir"`
					} `json:"ipam"`
				} `json:"plugins"`
			}
			require.NoError(t, json.Unmarshal(renderConflist(v), &got))
			assert.Equal(t, "1.1.0", got.CNIVersion)
			assert.Equal(t, v.network, got.Name)
			var types []string
			for _, p := range got.Plugins {
				types = append(types, p.Type)
			}
			assert.Equal(t, tc.wantTypes, types)
			if tc.wantCatena {
				assert.Equal(t, "/tmp/x/cache", got.Plugins[0].CacheDir)
				assert.Len(t, got.Plugins[0].Delegates, 3)
			} else {
				assert.Equal(t, "/tmp/x/host-local", got.Plugins[0].IPAM.DataDir)
			}
		})
	}
}
