package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain/events"
)

// TestCRIORestartDuringSlowDEL: CRI-O is restarted, by SIGTERM and by
// SIGKILL, while Catena runs the DEL of a sandbox's Stop and its last
// delegate sleeps in DEL. Once CRI-O is back, Stop and Remove of the
// sandbox succeed and nothing is left: no IP, veth, record, pinned netns
// or iptables rule.
//
//   - SIGTERM: CRI-O's shutdown waits for the Stop in flight, which
//     succeeds; one DEL, through both delegates.
//   - SIGKILL: the Stop in flight fails with CRI-O; Catena, its parent gone, still
//     finishes its DEL through both delegates. CRI-O died before libcni
//     could forget the ADD's result, so the Stop sent after the restart
//     DELs again with it as prevResult: Catena finds no record and, as the
//     plain conflist would, DELs both delegates again, best-effort and
//     without CNI_NETNS (DEL is idempotent), and succeeds.
func TestCRIORestartDuringSlowDEL(t *testing.T) {
	w := newWorld(t)
	net := "crioslow-" + w.id
	dir := t.TempDir()
	slowFile, flog := filepath.Join(dir, "slow"), filepath.Join(dir, "failer.log")
	slow := failer(fmt.Sprintf(`"hangDel":"3s","faultFile":%q,"logFile":%q`, slowFile, flog))
	c := startCRIO(t, w, string(w.catenaList(net, "1.1.0", w.bridgeDelegate(), slow).Bytes))
	c.waitNetworkReady()
	// as CRI-O's log quotes it (logrus escapes the quotes of its message)
	deleting := `Deleting pod catena-it_slow from CNI network \"` + net + `\"`

	cases := []struct {
		sig         syscall.Signal
		stopFails   bool
		delegateRun []int  // delegate calls of each DEL of the sandbox
		released    []bool // whether each DEL found no record and released
	}{
		{syscall.SIGTERM, false, []int{2}, []bool{false}},
		{syscall.SIGKILL, true, []int{2, 2}, []bool{false, true}},
	}
	for _, tc := range cases {
		sig := tc.sig
		touch(t, slowFile)
		id := c.mustRunPod("slow", 0)
		_, ip, _, err := c.podStatus(id)
		require.NoError(t, err)
		require.Equal(t, []string{ip}, w.ipamFiles(net))

		before := strings.Count(c.log(), deleting)
		stopped := make(chan error, 1)
		go func() { stopped <- c.stopPod(id) }()
		c.waitLog(deleting, before)
		waitPluginProc(t, id, "failer", 3*time.Second) // Catena is in the failer's 3 s sleep
		assert.NotContains(t, failerLog(t, flog), "DEL "+id+" eth0", "%v: the DEL is in flight", sig)
		start := time.Now()
		c.restart(sig)
		err = <-stopped
		t.Logf("%v during the DEL: CRI-O back in %s; the Stop in flight returned %v", sig, time.Since(start).Round(time.Millisecond), err)
		if tc.stopFails {
			assert.Error(t, err, "%v: the Stop in flight fails with CRI-O", sig)
		} else {
			assert.NoError(t, err, "%v: CRI-O's shutdown waits for the Stop in flight", sig)
		}
		require.NoError(t, os.Remove(slowFile), "DELs are quick from now on")
		c.waitNetworkReady()

		require.NoError(t, c.stopPod(id), "%v: Stop after the restart\n%s", sig, c.logTail())
		require.NoError(t, c.removePod(id), "%v: Remove after the restart\n%s", sig, c.logTail())
		assert.Empty(t, c.pods(), sig)
		assert.Empty(t, w.ipamFiles(net), "%v: no IP held", sig)
		assert.Empty(t, w.hostVeths(), "%v: no veth", sig)
		assert.Empty(t, w.records(net), "%v: no record", sig)
		assert.Empty(t, c.netnsMounts(), "%v: no netns pinned", sig)
		assert.Empty(t, iptablesLines(t, ip+"/"), "%v: no rule names the pod's IP", sig)
		dels := opsFor(catenaOps(t, w.cacheDir), "DEL", id)
		require.Len(t, dels, len(tc.delegateRun), "%v: DELs of the sandbox", sig)
		for i, op := range dels {
			assert.Equal(t, "ok", op.Outcome, "%v: DEL %d", sig, i+1)
			assert.Len(t, op.Calls, tc.delegateRun[i], "%v: delegate calls of DEL %d", sig, i+1)
			if !tc.released[i] {
				assert.Nil(t, op.NoRecordRelease, "%v: DEL %d", sig, i+1)
				continue
			}
			if assert.NotNil(t, op.NoRecordRelease, "%v: DEL %d found no record and released", sig, i+1) {
				assert.Equal(t, 2, op.NoRecordRelease.Delegates, "%v: DEL %d", sig, i+1)
				assert.Equal(t, events.ReleaseReleased, op.NoRecordRelease.Outcome, "%v: DEL %d: %s", sig, i+1, op.NoRecordRelease.Reason)
				assert.Empty(t, op.NoRecordRelease.Failed, "%v: DEL %d", sig, i+1)
			}
			assert.Contains(t, failerLog(t, flog), "DEL "+id+" eth0 -", "%v: DEL %d: without CNI_NETNS", sig, i+1)
		}
	}
}
