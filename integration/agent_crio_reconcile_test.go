package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestAgentCRIOReconcileStorageWiped: `catena-agent run`, its reconciler
// pointed at a private CRI-O's socket (a pass every 500 ms, grace 2 s),
// with two sandboxes through Catena: "ready", and "notready", whose pause
// process is killed so that CRI-O lists it NOTREADY (no DEL: CRI-O tears
// a sandbox's network down only at its Stop).
//
//   - While CRI-O lists both, nothing is marked or reclaimed for grace + 4
//     intervals, though nothing runs in notready's netns any more: a
//     listed sandbox is alive in any state.
//   - CRI-O is killed and its storage (root and runroot, where it keeps
//     its sandboxes) wiped, with libcni's cache of the two (otherwise
//     CRI-O's GC at its start DELs them itself, through Catena): while it
//     is down the passes meet runtime errors and keep every record.
//   - Restarted, CRI-O lists no sandbox. ready's pause process still runs
//     in the netns of its ADD, so it is kept; notready's netns is still
//     pinned, with no process in it, which under an empty list is no
//     proof (a pod with drop_infra_ctr between two restarts of its
//     containers looks so): it too is kept, unmarked, for grace + 4
//     intervals.
//   - A new sandbox, "fresh", starts: CRI-O's list is no longer empty, and
//     decides. notready is marked and reclaimed within grace + 2 intervals
//     (plus its teardown) of fresh's start. Once ready's pause process is
//     killed, it is reclaimed within the same bound.
//
// Each reclaim is one RECLAIM op; afterwards only fresh's IP, veth and
// record are left, and none once it is stopped and removed.
func TestAgentCRIOReconcileStorageWiped(t *testing.T) {
	const (
		interval = 500 * time.Millisecond
		grace    = 2 * time.Second
	)
	start := time.Now()
	n := newCRIOAgentNode(t)
	w, c := n.w, n.c
	offset := len(c.log())
	// Catena's GC (CRI-O sends it at each start) keeps records younger
	// than this: only the reconciler reclaims here
	p := n.startRun(n.crioReconcileFlags(interval, grace, "--gc-grace-period", "10m")...)
	n.waitCatena(offset)

	ready, notready := c.mustRunPod("ready", 0), c.mustRunPod("notready", 0)
	readyPID, notreadyPID := c.sandboxPID(ready), c.sandboxPID(notready)
	t.Cleanup(func() { killPause(readyPID); killPause(notreadyPID) })
	created := time.Now()
	require.Len(t, w.records(n.net), 2)
	require.Len(t, w.ipamFiles(n.net), 2)
	require.Len(t, w.hostVeths(), 2)
	killPID(t, notreadyPID)
	c.eventually("CRI-O lists notready NOTREADY", 30*time.Second, func() error {
		if st := c.podState(notready); st != cri.PodSandboxState_SANDBOX_NOTREADY {
			return fmt.Errorf("state %v", st)
		}
		return nil
	})
	require.Equal(t, cri.PodSandboxState_SANDBOX_READY, c.podState(ready))
	listed := grace + 4*interval
	time.Sleep(max(listed-time.Since(created), interval))
	assert.Len(t, w.records(n.net), 2, "nothing reclaimed while CRI-O lists the sandboxes")
	assert.False(t, exists(t, n.markPath(notready)), "notready, listed NOTREADY, is not marked")
	assert.False(t, exists(t, n.markPath(ready)))
	assert.Zero(t, p.metric("catena_reconcile_marked_total")+p.metric("catena_reconcile_reclaimed_total"))

	c.crash()
	c.wipeStorage()
	// libcni's cache goes with it: with it, CRI-O's GC at its start would
	// DEL every cached attachment it no longer knows, through Catena
	// (libcni's GC runs the cached conflist), before any reconcile pass
	for _, id := range []string{ready, notready} {
		entries := libcniEntries(t, id)
		require.Len(t, entries, 1, id)
		require.NoError(t, os.Remove(entries[0]))
	}
	// the pause image went with the storage: a node pulls it again, for
	// the sandboxes kubelet makes afresh
	c.loadImage(pauseImage, filepath.Join(c.dir, "pause.tar"))
	time.Sleep(2 * interval)
	runtimeErrors := p.metric("catena_reconcile_runtime_errors_total")
	assert.Positive(t, runtimeErrors, "passes met CRI-O down")
	assert.Positive(t, p.metric("catena_reconcile_kept_total", "cause=runtime"), "and kept the records because of it")
	require.Len(t, w.records(n.net), 2, "nothing reclaimed while CRI-O is down")

	c.startAgain()
	assert.Empty(t, c.pods(), "the restarted CRI-O knows no sandbox")
	time.Sleep(grace + 4*interval)
	assert.Len(t, w.records(n.net), 2, "an empty list and a pinned netns with no process prove nothing")
	assert.False(t, exists(t, n.markPath(notready)), "notready is not marked")
	assert.Zero(t, p.metric("catena_reconcile_marked_total")+p.metric("catena_reconcile_reclaimed_total"))

	fresh := c.mustRunPod("fresh", 0)
	freshPID := c.sandboxPID(fresh)
	t.Cleanup(func() { killPause(freshPID) })
	tookNotready := p.waitFor("notready reclaimed", 30*time.Second, func() (bool, string) {
		return !exists(t, n.recordPath(notready)), "its record is still there"
	})
	assert.True(t, exists(t, n.recordPath(ready)), "ready, whose pause process runs, is kept")
	assert.False(t, exists(t, n.markPath(ready)), "and not marked")
	assert.Len(t, w.ipamFiles(n.net), 2, "notready's IP released")
	assert.Len(t, w.hostVeths(), 2, "notready's veth deleted")

	killPID(t, readyPID)
	tookReady := p.waitFor("ready reclaimed", 30*time.Second, func() (bool, string) {
		return !exists(t, n.recordPath(ready)), "its record is still there"
	})
	reclaims := n.reclaimsCounted(p, 2)
	require.Len(t, reclaims, 2, "one reclaim per lost attachment")
	var teardown time.Duration
	for _, op := range reclaims {
		assert.Equal(t, "ok", op.Outcome, "%+v", op)
		teardown = max(teardown, op.Duration)
	}
	bound := grace + 2*interval + teardown + 2*time.Second // 2 s: CRI calls, record reads, the 50 ms poll, a loaded machine
	assert.LessOrEqual(t, tookNotready, bound, "notready reclaimed within grace + 2 intervals of fresh's start")
	assert.LessOrEqual(t, tookReady, bound, "ready reclaimed within grace + 2 intervals of its pause process's end")
	assert.Len(t, w.ipamFiles(n.net), 1, "only fresh's IP held")
	assert.Len(t, w.hostVeths(), 1, "only fresh's veth")
	assert.Len(t, w.records(n.net), 1, "only fresh's record")
	assert.Empty(t, n.opsOf("RETRY", "ABANDON"))
	n.stopRemove(fresh)
	n.requireNothingHeld()
	t.Logf("CRI-O storage wiped: held %s while listed (one NOTREADY); outage %.0f runtime errors, 0 reclaimed; after the restart both kept while CRI-O listed nothing; "+
		"once fresh started, notready reclaimed in %s, ready kept until its pause process was killed, then reclaimed in %s (bound %s); test took %s",
		listed, runtimeErrors, tookNotready.Round(time.Millisecond), tookReady.Round(time.Millisecond), bound.Round(time.Millisecond),
		time.Since(start).Round(time.Millisecond))
}
