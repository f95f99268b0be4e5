package libchain

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lostResult is the result libcni cached at the ADD of c1 and hands a DEL
// of it as prevResult.
const lostResult = `{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"/var/run/netns/c1"}],` +
	`"ips":[{"interface":0,"address":"10.0.0.7/24"}]}`

// logRecords decodes the JSON log lines in logs whose msg is msg.
func logRecords(t *testing.T, logs *bytes.Buffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), "log line %q", line)
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// TestDelWithNoRecord: a DEL that finds no record and nothing to adopt,
// handed the result of an ADD as its prevResult (the record was lost),
// DELs every delegate of its config in reverse, each with that result
// converted to its version and without CNI_NETNS, and succeeds even when
// a delegate fails, which is logged with the attachment and the delegate
// and journaled. Without a prevResult it invokes nothing. A record, or an
// adoptable entry of the primary, is torn down as before: no release.
func TestDelWithNoRecord(t *testing.T) {
	const failedMsg = "best-effort DEL with no record failed"
	tests := []struct {
		name       string
		prev       string
		recorded   bool // an ADD through Catena left its record
		adoptable  bool // the finder has the primary's entry of c1
		failDel    string
		wantCalls  []string
		wantNetNS  string // CNI_NETNS of every DEL
		wantRel    *OpRelease
		wantAdopt  bool
		wantFailed []string // delegates whose failure is logged
	}{
		{name: "no prevResult: nothing invoked", wantCalls: []string{}},
		{name: "prevResult: every delegate DELed in reverse without CNI_NETNS", prev: lostResult,
			wantCalls: []string{"DEL tuning", "DEL portmap", "DEL ipam"}, wantRel: &OpRelease{Outcome: ReleaseReleased, Delegates: 3}},
		{name: "a delegate fails: the others are DELed all the same, and the DEL succeeds", prev: lostResult, failDel: "portmap",
			wantCalls:  []string{"DEL tuning", "DEL portmap", "DEL ipam"},
			wantRel:    &OpRelease{Outcome: ReleasePartial, Delegates: 3, Failed: []OpFailure{{Index: 1, Type: "portmap", Error: "portmap DEL failed on purpose"}}},
			wantFailed: []string{"delegate 1 (portmap)"}},
		{name: "a record: torn down from it, with the runtime's CNI_NETNS", prev: lostResult, recorded: true,
			wantCalls: []string{"DEL tuning", "DEL portmap", "DEL ipam"}, wantNetNS: "/var/run/netns/c1"},
		{name: "an adoptable entry of the primary: adopted, not released", prev: lostResult, adoptable: true,
			wantCalls: []string{"DEL portmap", "DEL ipam"}, wantNetNS: "/var/run/netns/c1", wantAdopt: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness()
			var logs bytes.Buffer
			h.eng.Log = slog.New(slog.NewJSONHandler(&logs, nil))
			var ops []Op
			h.eng.OnOp = func(op Op) { ops = append(ops, op) }
			// portmap pinned at an older version: it gets the result
			// converted down to it, as a recorded teardown passes it.
			conf := chainConf(t, "1.0.0", dIPAM, `{"type":"portmap","cniVersion":"0.4.0"}`, dTune)
			r := req(conf, "c1")
			f := &fakeFinder{store: h.store}
			if tt.adoptable {
				f.rec = primaryRecord(t, "c1")
			}
			h.eng.Orphans = f
			if tt.recorded {
				_, err := h.eng.Add(context.Background(), r)
				require.NoError(t, err)
				h.exec.reset()
				ops = nil
			}
			if tt.failDel != "" {
				h.exec.set(tt.failDel, behaviour{failDel: true})
			}
			if tt.prev != "" {
				dc := *conf
				dc.PrevResult = json.RawMessage(tt.prev)
				r.Conf = &dc
			}

			require.NoError(t, h.eng.Del(context.Background(), r))

			assert.Equal(t, tt.wantCalls, h.exec.seen())
			assert.Equal(t, !tt.recorded, f.asked == 1, "the finder is asked first, and only with no record")
			for _, c := range h.exec.calls {
				assert.Equal(t, tt.wantNetNS, c.NetNS, "CNI_NETNS of DEL %s", c.Type)
				assert.Equal(t, "c1", c.ContainerID)
				if tt.wantRel == nil {
					continue
				}
				prev := c.prevResult()
				require.NotNil(t, prev, "DEL %s gets the prevResult", c.Type)
				assert.Equal(t, c.Config["cniVersion"], prev["cniVersion"], "DEL %s: the prevResult in its version", c.Type)
				ips, _ := prev["ips"].([]any)
				require.Len(t, ips, 1, "DEL %s", c.Type)
				assert.Equal(t, "10.0.0.7/24", ips[0].(map[string]any)["address"], "DEL %s", c.Type)
			}
			h.noRecord(t, r)
			require.Len(t, ops, 1)
			assert.Equal(t, "ok", ops[0].Outcome)
			assert.Equal(t, tt.wantRel, ops[0].NoRecordRelease, "the journal says what was released")
			assert.Equal(t, tt.wantAdopt, ops[0].Adopted != "")
			for _, c := range ops[0].Calls {
				assert.Equal(t, c.Type == tt.failDel, c.Error != "", "the journal's call of %s", c.Type)
			}
			logged := logRecords(t, &logs, failedMsg)
			require.Len(t, logged, len(tt.wantFailed), "failures logged")
			for i, d := range tt.wantFailed {
				assert.Equal(t, r.Key().String(), logged[i]["attachment"])
				assert.Equal(t, d, logged[i]["delegate"])
				assert.Contains(t, logged[i]["error"], "DEL failed on purpose")
			}
		})
	}
}

// TestDelWithNoRecordRepeats: a DEL with no record keeps none, so a
// repeated DEL with the same prevResult DELs every delegate again, and a
// DEL with none after it invokes nothing.
func TestDelWithNoRecordRepeats(t *testing.T) {
	h := newHarness()
	conf := chainConf(t, "1.0.0", dIPAM, dPort)
	withPrev := *conf
	withPrev.PrevResult = json.RawMessage(lostResult)
	r := req(&withPrev, "c1")
	for range 2 {
		h.exec.reset()
		require.NoError(t, h.eng.Del(context.Background(), r))
		assert.Equal(t, []string{"DEL portmap", "DEL ipam"}, h.exec.seen())
		h.noRecord(t, r)
	}
	h.exec.reset()
	require.NoError(t, h.eng.Del(context.Background(), req(conf, "c1")))
	assert.Empty(t, h.exec.seen())
}
