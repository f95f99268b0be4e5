package libchain

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/internal/testclock"
)

// dFlaky is a delegate the tests make fail its DEL once.
const dFlaky = `{"type":"flaky"}`

// reuseWorld is the field's failure: a chain [ipam with a range of one
// address, firewall (frees by address), flaky] on a real DiskStore (on an
// in-memory fs, so that the teardown index, tombstones and barriers are
// the ones catena runs with). A is added and its runtime's DEL fails at
// flaky, so the runtime keeps A's result; flaky then works again.
type reuseWorld struct {
	eng   *Engine
	exec  *fakeExec
	clock *testclock.Clock
	conf  *NetConf
	store *cache.DiskStore
	fs    afero.Fs
	// resultA is what libcni cached at A's ADD and hands A's later DELs.
	resultA json.RawMessage
	ops     []Op
}

func newReuseWorld(t *testing.T) *reuseWorld {
	t.Helper()
	w := &reuseWorld{exec: newFakeExec(), clock: newSyncClock()}
	w.exec.oneAddress = true
	w.fs = afero.NewMemMapFs()
	w.store = cache.NewDiskStore(w.fs, "/var/lib/cni/catena", cache.NewMemLocker())
	w.eng = &Engine{Store: w.store, Exec: w.exec, Now: w.clock.Now, OnOp: func(op Op) { w.ops = append(w.ops, op) }}
	w.conf = chainConf(t, "1.1.0", dIPAM, `{"type":"firewall"}`, dFlaky)
	res, err := w.eng.Add(t.Context(), req(w.conf, "A"))
	require.NoError(t, err)
	w.resultA, err = json.Marshal(res)
	require.NoError(t, err)
	w.exec.set("flaky", behaviour{failDel: true})
	require.Error(t, w.eng.Del(t.Context(), req(w.conf, "A")), "A's runtime DEL fails at flaky")
	w.exec.set("flaky", behaviour{})
	w.clock.Advance(time.Hour) // A's retry is due, and past any grace
	return w
}

// staleDel is the runtime's DEL of A with the result it cached.
func (w *reuseWorld) staleDel(t *testing.T) Op {
	t.Helper()
	conf := *w.conf
	conf.PrevResult = w.resultA
	w.exec.reset()
	w.ops = nil
	require.NoError(t, w.eng.Del(t.Context(), req(&conf, "A")), "a DEL with no record succeeds")
	require.Len(t, w.ops, 1)
	return w.ops[0]
}

// addB is a new pod, given the address A had.
func (w *reuseWorld) addB(t *testing.T) {
	t.Helper()
	res, err := w.eng.Add(t.Context(), req(w.conf, "B"))
	require.NoError(t, err)
	raw, err := json.Marshal(res)
	require.NoError(t, err)
	ips, err := resultIPs(raw)
	require.NoError(t, err)
	a, err := resultIPs(w.resultA)
	require.NoError(t, err)
	require.Equal(t, a, ips, "B has A's old address")
}

// TestStaleDelAfterAnotherTeardown: whichever teardown completes A's after
// its runtime's DEL failed (the retry pass, GC, a reclaim, a repair), B
// then gets A's address, and the runtime's retried DEL of A with A's
// cached result invokes no delegate: a tombstone says A is gone, and the
// DEL clears it. The DEL after that (the tombstone gone) still frees
// nothing of B's: B's record holds the address.
func TestStaleDelAfterAnotherTeardown(t *testing.T) {
	paths := []struct {
		name string
		by   string
		run  func(t *testing.T, w *reuseWorld)
	}{
		{"retry pass", "RETRY", func(t *testing.T, w *reuseWorld) {
			rep, err := w.eng.RetryPending(t.Context(), gcReq(w.conf), RetryOptions{Linger: -1})
			require.NoError(t, err)
			require.Equal(t, 1, rep.Released, "%+v", rep)
		}},
		{"runtime GC", "GC", func(t *testing.T, w *reuseWorld) {
			conf := *w.conf
			conf.ValidAttachments = []byte(`[{"containerID":"other","ifname":"eth0"}]`)
			require.NoError(t, w.eng.GC(t.Context(), gcReq(&conf)))
		}},
		{"reclaim", "RECLAIM", func(t *testing.T, w *reuseWorld) {
			_, err := w.eng.Reclaim(t.Context(), keyOf(w.conf, "A"), ReclaimOptions{Verb: "RECLAIM", Path: "/opt/cni/bin"})
			require.NoError(t, err)
		}},
		{"repair", "REPAIR", func(t *testing.T, w *reuseWorld) {
			rep, err := w.eng.Repair(t.Context(), gcReq(w.conf), nil)
			require.NoError(t, err)
			require.Len(t, rep.Repaired, 1)
		}},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			w := newReuseWorld(t)
			p.run(t, w)
			_, err := w.store.Load(keyOf(w.conf, "A"))
			require.ErrorIs(t, err, cache.ErrNotFound, "A is torn down")
			tomb, err := w.store.TombstoneOf(keyOf(w.conf, "A"))
			require.NoError(t, err, "A's teardown left a tombstone")
			assert.Equal(t, p.by, tomb.By)
			assert.Equal(t, []string{"10.0.0.1"}, tomb.IPs)
			w.addB(t)

			op := w.staleDel(t)
			assert.Empty(t, w.exec.seen(), "the stale DEL invokes no delegate")
			require.NotNil(t, op.NoRecordRelease)
			assert.Equal(t, ReleaseTombstone, op.NoRecordRelease.Outcome)
			assert.Contains(t, op.NoRecordRelease.Reason, "torn down by "+p.by)
			_, err = w.store.TombstoneOf(keyOf(w.conf, "A"))
			require.ErrorIs(t, err, cache.ErrNotFound, "the runtime's DEL clears the tombstone")

			op = w.staleDel(t)
			assert.Empty(t, w.exec.seen(), "a repeat invokes nothing either: B holds the address")
			require.NotNil(t, op.NoRecordRelease)
			assert.Equal(t, ReleaseKept, op.NoRecordRelease.Outcome)
			assert.Contains(t, op.NoRecordRelease.Reason, "10.0.0.1 is held by "+keyOf(w.conf, "B").String())
			b, err := w.store.Load(keyOf(w.conf, "B"))
			require.NoError(t, err)
			assert.Equal(t, cache.PhaseComplete, b.Phase, "B is untouched")
		})
	}
}

// TestNoRecordReleaseKeepsOnDoubt: a DEL with no record and no tombstone,
// handed A's result, releases only when no live record may hold what the
// result names.
func TestNoRecordReleaseKeepsOnDoubt(t *testing.T) {
	tests := []struct {
		name       string
		setup      func(t *testing.T, w *reuseWorld) func()
		wantOut    string
		wantReason string
		wantCalls  []string
	}{
		{name: "A's runtime DEL completed, B got the address: kept", setup: func(t *testing.T, w *reuseWorld) func() {
			w.addB(t)
			return nil
		}, wantOut: ReleaseKept, wantReason: "10.0.0.1 is held by podnet/B/eth0"},
		{name: "nothing else on the node: released", setup: func(*testing.T, *reuseWorld) func() { return nil },
			wantOut: ReleaseReleased, wantCalls: []string{"DEL flaky", "DEL firewall", "DEL ipam"}},
		{name: "another address in use elsewhere: released", setup: func(t *testing.T, w *reuseWorld) func() {
			w.exec.oneAddress = false
			w.exec.next = 5
			_, err := w.eng.Add(t.Context(), req(w.conf, "C"))
			require.NoError(t, err)
			return nil
		}, wantOut: ReleaseReleased, wantCalls: []string{"DEL flaky", "DEL firewall", "DEL ipam"}},
		{name: "an ADD of the network under way, its address not known yet: kept", setup: func(t *testing.T, w *reuseWorld) func() {
			rec := &cache.Record{Key: keyOf(w.conf, "B"), Phase: cache.PhaseAdding, CNIVersion: "1.1.0",
				Steps: []cache.Step{{Index: 0, Type: "ipam", CNIVersion: "1.1.0", State: cache.StepStarting, Config: json.RawMessage(`{}`)}}}
			require.NoError(t, w.store.Save(rec))
			return nil
		}, wantOut: ReleaseKept, wantReason: "the addresses of podnet/B/eth0 (adding) are not known yet"},
		{name: "a record that cannot be read: kept", setup: func(t *testing.T, w *reuseWorld) func() {
			w.addB(t)
			corruptRecord(t, w, keyOf(w.conf, "B"))
			return nil
		}, wantOut: ReleaseKept, wantReason: "the record of podnet/B/eth0 cannot be read"},
		{name: "the network's barrier held (a GC listing): kept", setup: func(t *testing.T, w *reuseWorld) func() {
			u, err := w.store.Barrier(t.Context(), w.conf.Name, true)
			require.NoError(t, err)
			w.conf.LockTimeout = 30 * time.Millisecond
			return func() { require.NoError(t, u.Unlock()) }
		}, wantOut: ReleaseKept, wantReason: `DEL on network "podnet": network podnet is held`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newReuseWorld(t)
			require.NoError(t, w.eng.Del(t.Context(), req(w.conf, "A")), "A's runtime DEL completes")
			_, err := w.store.TombstoneOf(keyOf(w.conf, "A"))
			require.ErrorIs(t, err, cache.ErrNotFound, "the runtime's own DEL leaves no tombstone")
			if done := tt.setup(t, w); done != nil {
				defer done()
			}

			op := w.staleDel(t)
			require.NotNil(t, op.NoRecordRelease)
			assert.Equal(t, tt.wantOut, op.NoRecordRelease.Outcome)
			assert.Contains(t, op.NoRecordRelease.Reason, tt.wantReason)
			if tt.wantCalls == nil {
				tt.wantCalls = []string{}
			}
			assert.Equal(t, tt.wantCalls, w.exec.seen())
			assert.Equal(t, "ok", op.Outcome, "the DEL succeeds")
		})
	}
}

// TestBuryFailureKeepsTheRecord: a teardown whose tombstone cannot be
// written keeps the record, with every step deleted and pending, rather
// than leave no trace of A; the runtime's next DEL then invokes nothing.
func TestBuryFailureKeepsTheRecord(t *testing.T) {
	h := newHarness()
	conf := chainConf(t, "1.0.0", dIPAM, dPort)
	failedRollback(t, h.eng, h.exec, conf)
	h.exec.set("ipam", behaviour{})
	h.store.failBury = errors.New("disk full")

	_, err := h.eng.Repair(context.Background(), gcReq(conf), nil)
	require.ErrorContains(t, err, "still need teardown")
	rec := h.record(t, req(conf, "c1"))
	assert.Equal(t, cache.PhaseNeedsTeardown, rec.Phase)
	assert.Contains(t, rec.LastError, "its tombstone could not be written: disk full")
	for _, s := range rec.Steps {
		assert.False(t, s.Held(), "step %d", s.Index)
	}

	h.store.failBury = nil
	h.exec.reset()
	require.NoError(t, h.eng.Del(context.Background(), req(conf, "c1")))
	assert.Empty(t, h.exec.seen(), "nothing is held: nothing invoked")
	h.noRecord(t, req(conf, "c1"))
}

// TestTombstonesPruned: a tombstone no runtime's DEL came to clear goes
// once older than cache.TombstoneMaxAge, at the next GC.
func TestTombstonesPruned(t *testing.T) {
	w := newReuseWorld(t)
	_, err := w.eng.RetryPending(t.Context(), gcReq(w.conf), RetryOptions{Linger: -1})
	require.NoError(t, err)
	_, err = w.store.TombstoneOf(keyOf(w.conf, "A"))
	require.NoError(t, err)

	conf := *w.conf
	conf.ValidAttachments = []byte(`[]`)
	w.clock.Advance(cache.TombstoneMaxAge - time.Minute)
	require.NoError(t, w.eng.GC(t.Context(), gcReq(&conf)))
	_, err = w.store.TombstoneOf(keyOf(w.conf, "A"))
	require.NoError(t, err, "younger than the bound: kept")

	w.clock.Advance(2 * time.Minute)
	require.NoError(t, w.eng.GC(t.Context(), gcReq(&conf)))
	_, err = w.store.TombstoneOf(keyOf(w.conf, "A"))
	require.ErrorIs(t, err, cache.ErrNotFound)
}

// corruptRecord flips a byte of key's record file, so that its checksum
// no longer verifies.
func corruptRecord(t *testing.T, w *reuseWorld, key cache.Key) {
	t.Helper()
	path := w.store.Path(key)
	data, err := afero.ReadFile(w.fs, path)
	require.NoError(t, err)
	data[40] ^= 0x01
	require.NoError(t, afero.WriteFile(w.fs, path, data, 0o600))
}

// TestNoRecordReleaseNetNS: a release passes the runtime's CNI_NETNS only
// when the namespace there has the DEL's ifname holding the result's
// address; else, or when that cannot be checked, none.
func TestNoRecordReleaseNetNS(t *testing.T) {
	tests := []struct {
		name      string
		holds     NetNSHoldsFunc
		wantNetNS string
	}{
		{"no checker: none", nil, ""},
		{"eth0 holds the address: the runtime's", func(path, ifname string, ips map[string]bool) (bool, error) {
			return path == "/var/run/netns/A" && ifname == "eth0" && ips["10.0.0.1"], nil
		}, "/var/run/netns/A"},
		{"not there: none", func(string, string, map[string]bool) (bool, error) { return false, nil }, ""},
		{"cannot be checked: none", func(string, string, map[string]bool) (bool, error) { return true, errors.New("EPERM") }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newReuseWorld(t)
			require.NoError(t, w.eng.Del(t.Context(), req(w.conf, "A")))
			w.eng.NetNSHolds = tt.holds
			op := w.staleDel(t)
			require.NotNil(t, op.NoRecordRelease)
			assert.Equal(t, ReleaseReleased, op.NoRecordRelease.Outcome)
			assert.Equal(t, tt.wantNetNS != "", op.NoRecordRelease.WithNetNS)
			require.Len(t, w.exec.calls, 3)
			for _, c := range w.exec.calls {
				assert.Equal(t, tt.wantNetNS, c.NetNS, "DEL %s", c.Type)
			}
		})
	}
}
