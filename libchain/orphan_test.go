package libchain

import (
	"context"
	"errors"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
)

// fakeFinder is an OrphanFinder that returns a fixed orphan or error and
// records whether key's lock was held when it was asked and settled.
type fakeFinder struct {
	store     *memStore
	rec       *cache.Record // nil: nothing found
	err       error
	settleErr error

	asked, settled       int
	heldAsked, heldSettl bool
}

var _ OrphanFinder = (*fakeFinder)(nil)

func (f *fakeFinder) held(key cache.Key) bool {
	f.store.mu.Lock()
	defer f.store.mu.Unlock()
	_, ok := f.store.held[key]
	return ok
}

func (f *fakeFinder) FindOrphan(key cache.Key) (*Orphan, error) {
	f.asked++
	f.heldAsked = f.held(key)
	if f.err != nil || f.rec == nil {
		return nil, f.err
	}
	rec := *f.rec
	rec.Steps = append([]cache.Step(nil), f.rec.Steps...)
	return &Orphan{Record: &rec, Source: "/results/podnet-" + key.ContainerID + "-eth0", Settle: func() error {
		f.settled++
		f.heldSettl = f.held(key)
		return f.settleErr
	}}, nil
}

// primaryRecord is the complete record of an ipam + portmap chain for cid,
// as adoption builds it: made by another engine, not in h's store.
func primaryRecord(t *testing.T, cid string) *cache.Record {
	t.Helper()
	p := newHarness()
	r := req(chainConf(t, "1.0.0", dIPAM, dPort), cid)
	_, err := p.eng.Add(context.Background(), r)
	require.NoError(t, err)
	return p.record(t, r)
}

// TestDelAdoptsOrphan: the window the agent's passes leave in the engine: a DEL
// that finds no record tears down, in reverse and with the cached configs
// (today's chain is another one), what Orphans finds, under the
// attachment's lock; a failed DEL leaves the adopted record saved as
// needs-teardown for the retried DEL, like any DEL; nothing found, or no
// finder, is the old success with nothing invoked; an unreadable source is
// code 11, so that the runtime retries.
func TestDelAdoptsOrphan(t *testing.T) {
	tests := []struct {
		name      string
		found     bool
		findErr   error
		settleErr error
		failDel   bool
		otherKey  bool
		wantCode  uint // 0: success
		wantCalls []string
		wantKept  bool
	}{
		{name: "adopted and torn down", found: true, wantCalls: []string{"DEL portmap", "DEL ipam"}},
		{name: "source not removed: still a success", found: true, settleErr: errors.New("EIO"), wantCalls: []string{"DEL portmap", "DEL ipam"}},
		{name: "failed DEL: recorded for the retry", found: true, failDel: true, wantCode: types.ErrTryAgainLater,
			wantCalls: []string{"DEL portmap"}, wantKept: true},
		{name: "nothing found", wantCalls: []string{}},
		{name: "source unreadable", findErr: errors.New("EIO"), wantCode: types.ErrTryAgainLater, wantCalls: []string{}},
		{name: "record of another attachment", found: true, otherKey: true, wantCode: types.ErrInternal, wantCalls: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness()
			r := req(chainConf(t, "1.0.0", dOther), "c1")
			f := &fakeFinder{store: h.store, err: tt.findErr, settleErr: tt.settleErr}
			if tt.found {
				f.rec = primaryRecord(t, "c1")
				if tt.otherKey {
					f.rec.Key.ContainerID = "c2"
				}
			}
			h.eng.Orphans = f
			var ops []Op
			h.eng.OnOp = func(op Op) { ops = append(ops, op) }
			if tt.failDel {
				h.exec.set("portmap", behaviour{failDel: true})
			}

			err := h.eng.Del(context.Background(), r)
			if tt.wantCode == 0 {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
				assert.Equal(t, tt.wantCode, cniCode(t, err), "%v", err)
			}
			assert.Equal(t, tt.wantCalls, h.exec.seen())
			assert.Equal(t, 1, f.asked)
			assert.True(t, f.heldAsked, "asked without the attachment's lock")
			require.Len(t, ops, 1)
			if len(tt.wantCalls) > 0 {
				assert.Equal(t, "/results/podnet-c1-eth0", ops[0].Adopted, "the journal names the source")
				for _, c := range h.exec.callsOf("DEL", "ipam") {
					assert.Equal(t, "c1", c.ContainerID)
				}
			} else {
				assert.Empty(t, ops[0].Adopted)
			}
			if !tt.wantKept {
				h.noRecord(t, r)
				if tt.wantCode == 0 && tt.found {
					assert.Equal(t, 1, f.settled)
					assert.True(t, f.heldSettl, "settled without the attachment's lock")
				}
				return
			}
			assert.Zero(t, f.settled, "a source settled before its teardown is complete")
			rec := h.record(t, r)
			assert.Equal(t, cache.PhaseNeedsTeardown, rec.Phase)
			assert.Equal(t, []cache.StepState{cache.StepAdded, cache.StepDelFailed}, states(rec))

			// The runtime's retried DEL finds the record: no second adoption.
			h.exec.set("portmap", behaviour{})
			h.exec.reset()
			require.NoError(t, h.eng.Del(context.Background(), r))
			assert.Equal(t, []string{"DEL portmap", "DEL ipam"}, h.exec.seen())
			assert.Equal(t, 1, f.asked)
			h.noRecord(t, r)
		})
	}
}

// TestDelWithRecordAsksNoFinder: a recorded attachment is torn down from
// its record; the finder is not asked.
func TestDelWithRecordAsksNoFinder(t *testing.T) {
	h := newHarness()
	r := req(chainConf(t, "1.0.0", dIPAM), "c1")
	_, err := h.eng.Add(context.Background(), r)
	require.NoError(t, err)
	f := &fakeFinder{store: h.store, rec: primaryRecord(t, "c1")}
	h.eng.Orphans = f
	h.exec.reset()
	require.NoError(t, h.eng.Del(context.Background(), r))
	assert.Equal(t, []string{"DEL ipam"}, h.exec.seen())
	assert.Zero(t, f.asked)
}
