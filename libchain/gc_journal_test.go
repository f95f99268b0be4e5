package libchain

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// opSummary is an Op as the GC journal tests compare it.
type opSummary struct {
	Verb, Attachment, Outcome string
	Calls                     []string
}

func summaries(ops []Op) []opSummary {
	out := make([]opSummary, len(ops))
	for i, op := range ops {
		s := opSummary{Verb: op.Verb, Attachment: op.Attachment, Outcome: op.Outcome}
		for _, c := range op.Calls {
			s.Calls = append(s.Calls, c.Verb+" "+c.Type)
		}
		out[i] = s
	}
	return out
}

// TestGCJournalsEachTeardown: a GC hands Engine.OnOp one GC operation per
// attachment it tears down, naming it, with its DELs and its outcome, and
// then the network's GC operation with the forwarded GCs; the CNI verb and
// CollectGarbage (catenactl gc) alike, but not a dry run.
func TestGCJournalsEachTeardown(t *testing.T) {
	valid := []Attachment{{ContainerID: "live", IfName: "eth0"}}
	tests := []struct {
		name string
		gc   func(e *Engine, conf *NetConf)
		want []opSummary
	}{
		{"CNI GC", func(e *Engine, conf *NetConf) {
			conf.ValidAttachments = []byte(`[{"containerID":"live","ifname":"eth0"}]`)
			assert.Error(t, e.GC(context.Background(), gcReq(conf)))
		}, []opSummary{
			{"GC", "podnet/dead/eth0", "ok", []string{"DEL portmap", "DEL ipam"}},
			{"GC", "podnet/stuck/eth0", "error", []string{"DEL failer"}},
			{"GC", "", "error", []string{"GC ipam", "GC portmap"}},
		}},
		{"CollectGarbage", func(e *Engine, conf *NetConf) {
			_, err := e.CollectGarbage(context.Background(), gcReq(conf), GCOptions{Valid: valid, SkipDelegates: true})
			assert.Error(t, err)
		}, []opSummary{
			{"GC", "podnet/dead/eth0", "ok", []string{"DEL portmap", "DEL ipam"}},
			{"GC", "podnet/stuck/eth0", "error", []string{"DEL failer"}},
			{"GC", "", "error", nil},
		}},
		{"dry run", func(e *Engine, conf *NetConf) {
			rep, err := e.CollectGarbage(context.Background(), gcReq(conf), GCOptions{Valid: valid, DryRun: true})
			assert.NoError(t, err)
			assert.Len(t, rep.WouldTearDown, 2)
		}, []opSummary{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, c, conf := gcHarness(t, "live", "dead")
			_, err := h.eng.Add(context.Background(), req(chainConf(t, "1.1.0", dIPAM, dFail), "stuck"))
			require.NoError(t, err)
			h.exec.set("failer", behaviour{failDel: true})
			c.advance(time.Hour)
			ops := []Op{}
			h.eng.OnOp = func(op Op) { ops = append(ops, op) }
			tt.gc(h.eng, conf)

			got := summaries(ops)
			if n := len(got); n > 1 { // the teardowns come in the store's order
				slices.SortFunc(got[:n-1], func(a, b opSummary) int { return strings.Compare(a.Attachment, b.Attachment) })
			}
			assert.Equal(t, tt.want, got)
			for _, op := range ops {
				if op.Attachment == "podnet/stuck/eth0" {
					assert.Contains(t, op.Error, "failer DEL failed on purpose")
				}
			}
		})
	}
}
