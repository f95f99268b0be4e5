package reconcile

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
)

// heldRecord saves a record whose DEL of c failed at failedAt: b and a
// still held, as after containerd gave up on a failed teardown.
func (w *world) heldRecord(cid string, failedAt time.Time) {
	w.t.Helper()
	rec := record(cid, true)
	rec.Phase = cache.PhaseNeedsTeardown
	rec.Steps[2].State, rec.Steps[2].DelFailedSince, rec.Steps[2].DelAttempts = cache.StepDelFailed, failedAt, 1
	require.NoError(w.t, w.store.Save(rec))
}

// TestRetryWithBackoff: rule 9. A record that needs teardown is retried
// whatever the runtime says (here: unreachable), with capped exponential
// backoff per record; once the fault is lifted the retry releases it. A
// second record keeps its own schedule.
func TestRetryWithBackoff(t *testing.T) {
	w := newWorld(t)
	w.rt.err = errors.New("runtime socket gone")
	w.exec.setFail("c")
	w.heldRecord("h1", w.clock)
	start := w.clock

	var retriedAt []time.Duration
	for w.clock.Sub(start) < 3*time.Minute {
		rep := w.pass()
		assert.Equal(t, 1, rep.Held)
		switch actionOf(rep, "h1") {
		case ActRetryFailed:
			retriedAt = append(retriedAt, w.clock.Sub(start))
		case ActBackoff:
		default:
			t.Fatalf("unexpected decision %+v", rep.Decisions)
		}
		w.clock = w.clock.Add(time.Second)
	}
	// Min 10s, doubling, capped at 1m: 0, 10, 30, 70, 130 s.
	assert.Equal(t, []time.Duration{0, 10 * time.Second, 30 * time.Second, 70 * time.Second, 130 * time.Second}, retriedAt)

	w.exec.setFail()
	w.clock = w.clock.Add(time.Minute)
	rep := w.pass()
	assert.Equal(t, ActRetried, actionOf(rep, "h1"))
	assert.Equal(t, 1, rep.Retried)
	assert.Zero(t, rep.Held, "held counts what is still held after the pass's retries")
	assert.Zero(t, rep.OldestHeld)
	assert.False(t, w.exists("h1"))
	assert.Zero(t, w.bo.Len(), "forgotten once done")
	assert.NotEmpty(t, rep.RuntimeError, "the runtime was never needed")
}

// TestAbandonAfter: off (the default), a DEL that always fails holds the
// record forever; on, once it has failed for abandonAfter the step is
// abandoned (kept in the record with its time), the teardown continues
// past it, and it is evented and counted.
func TestAbandonAfter(t *testing.T) {
	for _, tc := range []struct {
		name         string
		abandonAfter time.Duration
		wantGone     bool
	}{
		{"off", 0, false},
		{"on", 10 * time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.opts.AbandonAfter = tc.abandonAfter
			w.bo = &MemBackoff{Min: time.Second, Max: time.Second}
			w.exec.setFail("c")
			w.heldRecord("h", w.clock)
			abandoned := 0
			// Ten minutes, minus a second: never abandoned yet.
			for range 10 {
				w.clock = w.clock.Add(time.Minute - 100*time.Millisecond)
				rep := w.pass()
				abandoned += rep.Abandoned
			}
			assert.Zero(t, abandoned, "not before abandonAfter")
			require.True(t, w.exists("h"))
			w.clock = w.clock.Add(2 * time.Second)
			rep := w.pass()
			if !tc.wantGone {
				assert.Equal(t, ActRetryFailed, actionOf(rep, "h"))
				assert.True(t, w.exists("h"))
				assert.Zero(t, rep.Abandoned)
				return
			}
			assert.Equal(t, ActRetried, actionOf(rep, "h"))
			assert.Equal(t, 1, rep.Abandoned)
			assert.Equal(t, []int{2}, rep.Decisions[0].Abandoned)
			assert.False(t, w.exists("h"))
			dels := w.exec.dels()
			assert.Equal(t, []string{"h:b", "h:a"}, dels[len(dels)-2:], "the teardown continued past c")
			var verbs []string
			for _, op := range w.ops {
				verbs = append(verbs, op.Verb)
			}
			assert.Contains(t, verbs, "ABANDON")
		})
	}
}

// TestReclaimNetnsIdentity: rule 7. The reclaim's DELs get the recorded
// netns only while it is still the namespace of the ADD.
func TestReclaimNetnsIdentity(t *testing.T) {
	id := cache.NetNSIdentity{Dev: 4, Ino: 4026532000, ID: 77}
	for _, tc := range []struct {
		name      string
		now       cache.NetNSIdentity
		statErr   error
		wantNetNS string
	}{
		{"same namespace", id, nil, "/var/run/netns/x"},
		{"another namespace at the path", cache.NetNSIdentity{Dev: 4, Ino: 4026532000, ID: 78}, nil, ""},
		{"gone", cache.NetNSIdentity{}, errNotExist, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.eng.StatNetNS = func(string) (cache.NetNSIdentity, error) { return tc.now, tc.statErr }
			rec := record("x", true)
			rec.NetNSID = &id
			require.NoError(t, w.store.Save(rec))
			w.pass()
			w.clock = w.clock.Add(testGrace)
			rep := w.pass()
			require.Equal(t, ActReclaimed, actionOf(rep, "x"))
			require.Len(t, w.exec.calls, 3)
			for _, c := range w.exec.calls {
				assert.Equal(t, tc.wantNetNS, c.Args.NetNS)
				assert.Equal(t, "x", c.Args.ContainerID)
				assert.Equal(t, "/opt/cni/bin", c.Args.Path)
			}
		})
	}
}

// TestMemBackoff: due at once, then Min, doubling, capped at Max, per key.
func TestMemBackoff(t *testing.T) {
	b := &MemBackoff{Min: time.Second, Max: 4 * time.Second}
	t0 := time.Unix(1000, 0)
	k1, k2 := key("1"), key("2")
	assert.True(t, b.Due(k1, t0))
	var waits []time.Duration
	now := t0
	for range 5 {
		b.Failed(k1, now)
		next := now
		for !b.Due(k1, next) {
			next = next.Add(100 * time.Millisecond)
		}
		waits = append(waits, next.Sub(now))
		now = next
	}
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second}, waits)
	assert.True(t, b.Due(k2, t0), "per record")
	b.Forget(k1)
	assert.True(t, b.Due(k1, t0))
	assert.Zero(t, b.Len())
}

// TestIndexBackoff: with the teardown index's markers as the backoff, a
// failed retry is next due when its marker says (the engine's schedule: at
// once after the first failure, then 1 s doubling), across a new
// Reconciler, and a successful one clears the marker.
func TestIndexBackoff(t *testing.T) {
	w := newWorld(t)
	w.exec.setFail("c")
	w.heldRecord("h", w.clock)
	r := func() *Reconciler {
		rc := w.reconciler()
		rc.Backoff = IndexBackoff{Notes: w.store}
		return rc
	}
	var retriedAt []time.Duration
	start := w.clock
	for w.clock.Sub(start) < 20*time.Second {
		rep, _ := r().Pass(t.Context())
		if actionOf(rep, "h") == ActRetryFailed {
			retriedAt = append(retriedAt, w.clock.Sub(start))
		}
		w.clock = w.clock.Add(250 * time.Millisecond)
	}
	// A record without a marker is due at once; after its n-th failed
	// attempt it is due 1 s doubling later: 1, 2, 4, 8 s.
	assert.Equal(t, []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second, 15 * time.Second}, retriedAt)
	w.exec.setFail()
	w.clock = w.clock.Add(time.Minute)
	rep, _ := r().Pass(t.Context())
	assert.Equal(t, ActRetried, actionOf(rep, "h"))
	_, ok, err := w.store.PendingNoteOf(key("h"))
	require.NoError(t, err)
	assert.False(t, ok, "marker cleared")
}

// TestRetryBoundedAndFair: 20 records whose teardown keeps failing, a
// bound of 5 retries a pass. Each pass retries at most 5, oldest due first
// (a record without a marker first, then by the markers' due times), and
// defers the rest; an attempted record moves behind the others, so every
// record is attempted within ceil(20/5) = 4 passes, and none twice before
// all were tried once.
func TestRetryBoundedAndFair(t *testing.T) {
	w := newWorld(t)
	w.exec.setFail("c")
	for i := range 20 {
		w.heldRecord(string(rune('a'+i))+"held", w.clock)
	}
	tried := map[string]int{}
	for pass := 1; pass <= 4; pass++ {
		rc := w.reconciler()
		rc.Backoff = IndexBackoff{Notes: w.store}
		rc.Opts.MaxRetries, rc.Opts.RetryWorkers = 5, 3
		rep, _ := rc.Pass(t.Context())
		n, deferred := 0, 0
		for _, d := range rep.Decisions {
			switch d.Action {
			case ActRetryFailed:
				n++
				tried[d.Key.ContainerID]++
			case ActDeferred:
				deferred++
			}
		}
		assert.Equal(t, 5, n, "pass %d retries its bound", pass)
		assert.Equal(t, 20-5*pass, deferred, "pass %d defers the due ones over its bound (the tried ones back off)", pass)
		w.clock = w.clock.Add(100 * time.Millisecond)
	}
	assert.Len(t, tried, 20, "every record was attempted within 4 passes")
	for cid, n := range tried {
		assert.Equal(t, 1, n, "%s attempted once", cid)
	}
}
