package libchain

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGCListUnderBothKeys: libcni sends the valid list under
// cni.dev/valid-attachments and, for plugins written to the spec's first
// name of it, cni.dev/attachments too. GC reads either; when both differ,
// what either lists is valid (nothing a runtime listed is collected), and
// each delegate gets the widened list under both keys, byte for byte the
// same.
func TestGCListUnderBothKeys(t *testing.T) {
	const a, b = `{"containerID":"a","ifname":"eth0"}`, `{"containerID":"b","ifname":"eth0"}`
	for _, tc := range []struct {
		name, keys string
		kept       []string // the records GC leaves, in order; the rest are torn down
	}{
		{name: "valid-attachments only", keys: `"cni.dev/valid-attachments":[` + a + `],`, kept: []string{"a"}},
		{name: "attachments only", keys: `"cni.dev/attachments":[` + a + `],`, kept: []string{"a"}},
		{name: "both, the same", keys: `"cni.dev/valid-attachments":[` + a + `],"cni.dev/attachments":[` + a + `],`, kept: []string{"a"}},
		{name: "both, differing: the union", keys: `"cni.dev/valid-attachments":[` + a + `],"cni.dev/attachments":[` + b + `],`, kept: []string{"a", "b"}},
		{name: "one null, the other a list", keys: `"cni.dev/valid-attachments":null,"cni.dev/attachments":[` + b + `],`, kept: []string{"b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, c, _ := gcHarness(t, "a", "b", "c")
			c.advance(time.Hour)
			h.exec.reset()
			conf := confWithKeys(t, tc.keys)
			require.NoError(t, h.eng.GC(context.Background(), gcReq(conf)))
			for _, cid := range []string{"a", "b", "c"} {
				if slices.Contains(tc.kept, cid) {
					h.record(t, req(conf, cid))
				} else {
					h.noRecord(t, req(conf, cid))
				}
			}
			var want []any
			for _, cid := range tc.kept {
				want = append(want, map[string]any{"containerID": cid, "ifname": "eth0"})
			}
			for _, d := range []string{"ipam", "portmap"} {
				calls := h.exec.callsOf("GC", d)
				require.Len(t, calls, 1, d)
				var stdin map[string]json.RawMessage
				require.NoError(t, json.Unmarshal(calls[0].Stdin, &stdin))
				assert.JSONEq(t, string(stdin["cni.dev/valid-attachments"]), string(stdin["cni.dev/attachments"]), "%s: both keys, the same list", d)
				assert.Equal(t, want, calls[0].Config["cni.dev/valid-attachments"], d)
				assert.Equal(t, want, calls[0].Config["cni.dev/attachments"], d)
			}
		})
	}
	t.Run("neither key", func(t *testing.T) {
		h, c, _ := gcHarness(t, "a")
		c.advance(time.Hour)
		h.exec.reset()
		err := h.eng.GC(context.Background(), gcReq(confWithKeys(t, "")))
		require.Error(t, err)
		assert.Equal(t, types.ErrInvalidNetworkConfig, cniCode(t, err))
		assert.Empty(t, h.exec.seen())
	})
	t.Run("one of them malformed", func(t *testing.T) {
		h, c, _ := gcHarness(t, "a")
		c.advance(time.Hour)
		h.exec.reset()
		err := h.eng.GC(context.Background(), gcReq(confWithKeys(t, `"cni.dev/valid-attachments":[`+a+`],"cni.dev/attachments":{},`)))
		require.Error(t, err)
		assert.Equal(t, types.ErrInvalidNetworkConfig, cniCode(t, err))
		assert.Contains(t, err.Error(), "cni.dev/attachments")
		assert.Empty(t, h.exec.seen())
	})
}
