package reconcile

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
)

// TestInScope: rule 1, only K8S_POD_INFRA_CONTAINER_ID equal to the
// container ID.
func TestInScope(t *testing.T) {
	for _, tc := range []struct {
		args string
		want bool
	}{
		{"K8S_POD_INFRA_CONTAINER_ID=c1", true},
		{"IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=c1", true},
		{"K8S_POD_INFRA_CONTAINER_ID=c2", false},
		{"K8S_POD_INFRA_CONTAINER_ID=", false},
		{"K8S_POD_INFRA_CONTAINER_ID", false},
		{"K8S_POD_NAME=p", false},
		{"", false},
		{"X_K8S_POD_INFRA_CONTAINER_ID=c1", false},
		{"K8S_POD_INFRA_CONTAINER_ID=c1x", false},
	} {
		rec := &cache.Record{Key: key("c1"), Args: tc.args}
		assert.Equal(t, tc.want, InScope(rec), "%q", tc.args)
	}
}

// TestTwoPhases: rules 6 and 7. A candidate is marked, waits, and is
// reclaimed only on a pass at least grace after the mark, in strict
// reverse order, after which its record and mark are gone.
func TestTwoPhases(t *testing.T) {
	w := newWorld(t)
	w.add("gone", true)
	w.add("live", true)
	w.rt.set("live")

	rep := w.pass()
	assert.Equal(t, ActMarked, actionOf(rep, "gone"))
	assert.Equal(t, ActAlive, actionOf(rep, "live"))
	assert.Equal(t, 1, rep.Candidates)
	assert.True(t, w.marked("gone"))

	w.clock = w.clock.Add(testGrace - time.Second)
	rep = w.pass()
	assert.Equal(t, ActWaiting, actionOf(rep, "gone"))
	assert.Empty(t, w.exec.dels())

	w.clock = w.clock.Add(time.Second)
	rep = w.pass()
	assert.Equal(t, ActReclaimed, actionOf(rep, "gone"))
	assert.Equal(t, 1, rep.Reclaimed)
	assert.Equal(t, []string{"gone:c", "gone:b", "gone:a"}, w.exec.dels(), "strict reverse order")
	assert.False(t, w.exists("gone"))
	assert.False(t, w.marked("gone"))
	assert.True(t, w.exists("live"))
	assert.Equal(t, 4, w.rt.calls, "phase two called a fresh ListPodSandbox (1 + 1 + 2 calls)")
}

// TestPassHoldsCompleteRecordsSlim: the pass keeps of a complete record
// only what phase one reads (its steps and results are dropped: a reclaim
// reads the record afresh, as TestTwoPhases's DELs of every step show); a
// record that needs teardown is kept whole for its retry.
func TestPassHoldsCompleteRecordsSlim(t *testing.T) {
	w := newWorld(t)
	done := record("done", true)
	done.Result = json.RawMessage(`{"cniVersion":"1.1.0"}`)
	require.NoError(t, w.store.Save(done))
	w.heldRecord("held", w.clock)
	p := &pass{Reconciler: w.reconciler(), now: w.clock, rep: &Report{}}
	require.NoError(t, p.readRecords())
	require.Len(t, p.recs, 2)
	for _, rec := range p.recs {
		switch rec.Key.ContainerID {
		case "done":
			assert.Nil(t, rec.Steps)
			assert.Nil(t, rec.Result)
			assert.Equal(t, done.Args, rec.Args, "what phase one reads stays")
			assert.Equal(t, done.NetNSID, rec.NetNSID)
		case "held":
			assert.Len(t, rec.Steps, 3, "a record to retry is whole")
		}
	}
}

// TestNeverCandidates: rules 1, 3 and 4 over many passes: records out of
// scope, alive (in any state), changed within grace or locked are never
// marked, and an earlier mark of theirs is cleared.
func TestNeverCandidates(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(w *world)
		want  Action
	}{
		{"out of scope (cnitool, podman)", func(w *world) { w.add("x", false) }, ActOutOfScope},
		{"alive", func(w *world) { w.add("x", true); w.rt.set("x") }, ActAlive},
		{"changed within grace", func(w *world) {
			w.add("x", true)
			w.clock = time.Now().Add(testGrace / 2)
		}, ActRecent},
		{"lock held", func(w *world) {
			w.add("x", true)
			u, err := w.store.TryLock(key("x"), cache.Holder{PID: 1, Verb: "ADD"})
			require.NoError(t, err)
			t.Cleanup(func() { _ = u.Unlock() })
		}, ActInFlight},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			tc.setup(w)
			// A mark left by an earlier pass, when it was a candidate.
			require.NoError(t, cache.NewDiskMarks(w.fs, "/cache").PutMark(cache.Mark{Key: key("x"), MarkedAt: w.clock.Add(-time.Hour), Version: "old"}))
			for range 5 {
				rep := w.pass()
				assert.Equal(t, tc.want, actionOf(rep, "x"))
				assert.Zero(t, rep.Candidates)
				assert.False(t, w.marked("x"), "mark cleared")
				if tc.want != ActRecent {
					w.clock = w.clock.Add(testGrace)
				}
			}
			assert.True(t, w.exists("x"))
			assert.Empty(t, w.exec.dels())
		})
	}
}

// TestOrderRecordsFirst: rule 2. A record that appears while the runtime
// is being listed (an ADD finishing just before its sandbox is listed) is
// not seen by that pass: it can never be taken for a forgotten one.
func TestOrderRecordsFirst(t *testing.T) {
	w := newWorld(t)
	w.rt.hook = func(call int) {
		if call == 1 {
			w.add("late", true) // its sandbox is not in this answer
		}
	}
	rep := w.pass()
	assert.Equal(t, Action(""), actionOf(rep, "late"))
	assert.False(t, w.marked("late"))
	assert.Zero(t, rep.Records)
}

// TestPhaseTwoPreconditions: rule 6's reclaim conditions; each failing one
// leaves the record and clears the mark.
func TestPhaseTwoPreconditions(t *testing.T) {
	for _, tc := range []struct {
		name string
		// atFresh runs when phase two lists the runtime afresh.
		atFresh func(w *world)
	}{
		{"fresh ListPodSandbox lists it", func(w *world) { w.rt.set("x") }},
		{"record changed since the mark", func(w *world) {
			rec, err := w.store.Load(key("x"))
			require.NoError(t, err)
			require.NoError(t, w.store.Save(rec))
		}},
		{"lock taken meanwhile", func(w *world) {
			u, err := w.store.TryLock(key("x"), cache.Holder{PID: 1, Verb: "DEL"})
			require.NoError(t, err)
			t.Cleanup(func() { _ = u.Unlock() })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.add("x", true)
			w.pass()
			require.True(t, w.marked("x"))
			w.clock = w.clock.Add(testGrace)
			w.rt.hook = func(call int) {
				if call == 3 {
					tc.atFresh(w)
				}
			}
			rep := w.pass()
			assert.Equal(t, ActLeft, actionOf(rep, "x"), "%+v", rep.Decisions)
			assert.Zero(t, rep.Reclaimed)
			assert.True(t, w.exists("x"))
			assert.False(t, w.marked("x"), "anything else clears the mark")
			assert.Empty(t, w.exec.dels())
		})
	}
}

// TestChangedRecordIsMarkedAnew: a record whose version moved on since its
// mark (but not within grace) starts phase one again.
func TestChangedRecordIsMarkedAnew(t *testing.T) {
	w := newWorld(t)
	w.add("x", true)
	require.NoError(t, cache.NewDiskMarks(w.fs, "/cache").PutMark(cache.Mark{Key: key("x"), MarkedAt: w.clock.Add(-time.Hour), Version: "1/complete"}))
	rep := w.pass()
	assert.Equal(t, ActMarked, actionOf(rep, "x"))
	assert.Zero(t, rep.Reclaimed)
	assert.True(t, w.exists("x"))
}

// TestRestartBetweenPhases: a mark survives a new Reconciler (an agent
// restart) and nothing is reclaimed early.
func TestRestartBetweenPhases(t *testing.T) {
	w := newWorld(t)
	w.add("x", true)
	w.pass()
	w.bo = &MemBackoff{} // the agent's memory is gone
	w.clock = w.clock.Add(testGrace / 2)
	rep := w.pass()
	assert.Equal(t, ActWaiting, actionOf(rep, "x"))
	assert.True(t, w.exists("x"))
	w.clock = w.clock.Add(testGrace / 2)
	rep = w.pass()
	assert.Equal(t, ActReclaimed, actionOf(rep, "x"))
}

// TestErrorsMeanKeep: rule 8. The runtime failing (on the first list or on
// phase two's fresh one) or an unreadable record: nothing reclaimed or
// marked in that pass, the cause in the report; marks are kept for later.
func TestErrorsMeanKeep(t *testing.T) {
	for _, tc := range []struct {
		name      string
		breakIt   func(w *world)
		wantCause string
		// phase one ran before phase two's list failed: y was marked.
		wantYMarked bool
	}{
		{"runtime unreachable", func(w *world) { w.rt.err = errors.New("connection refused") }, "runtime error", false},
		{"runtime fails on the fresh list", func(w *world) {
			w.rt.hook = func(call int) {
				if call == 2 {
					w.rt.err = errors.New("deadline exceeded")
				}
			}
		}, "runtime error", true},
		{"unreadable record", func(w *world) {
			bad := record("bad", true)
			require.NoError(t, w.store.Save(bad))
			require.NoError(t, afero_WriteFile(w, w.store.Path(key("bad")), []byte("garbage\n")))
		}, "unreadable record", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.add("x", true)
			w.add("y", true)
			require.NoError(t, cache.NewDiskMarks(w.fs, "/cache").PutMark(cache.Mark{Key: key("x"), MarkedAt: w.clock.Add(-time.Hour), Version: Version(mustLoad(t, w, "x"))}))
			tc.breakIt(w)
			rep := w.pass()
			assert.Zero(t, rep.Reclaimed)
			assert.Equal(t, tc.wantYMarked, rep.Marked == 1)
			assert.Contains(t, rep.KeptCause, tc.wantCause)
			assert.GreaterOrEqual(t, rep.Kept, 1)
			assert.Equal(t, ActKept, actionOf(rep, "x"))
			assert.True(t, w.exists("x"))
			assert.True(t, w.exists("y"))
			assert.True(t, w.marked("x"), "the mark waits for a pass that can decide")
			assert.Equal(t, tc.wantYMarked, w.marked("y"))
			assert.Empty(t, w.exec.dels())
		})
	}
}

func mustLoad(t *testing.T, w *world, cid string) *cache.Record {
	t.Helper()
	rec, err := w.store.Load(key(cid))
	require.NoError(t, err)
	return rec
}

// TestDryRun writes no mark and tears nothing down.
func TestDryRun(t *testing.T) {
	w := newWorld(t)
	w.add("x", true)
	w.add("due", true)
	require.NoError(t, cache.NewDiskMarks(w.fs, "/cache").PutMark(cache.Mark{Key: key("due"), MarkedAt: w.clock.Add(-time.Hour), Version: Version(mustLoad(t, w, "due"))}))
	held := record("held", true)
	held.Phase, held.Steps[0].State = cache.PhaseNeedsTeardown, cache.StepDelFailed
	require.NoError(t, w.store.Save(held))
	w.opts.DryRun = true
	rep := w.pass()
	assert.Equal(t, ActWouldMark, actionOf(rep, "x"))
	assert.Equal(t, ActWouldReclaim, actionOf(rep, "due"))
	assert.Equal(t, ActWouldRetry, actionOf(rep, "held"))
	assert.False(t, w.marked("x"))
	assert.True(t, w.marked("due"))
	assert.Empty(t, w.exec.dels())
	assert.True(t, w.exists("due"))
}
