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

// failerLog is the failer's log of invocations, one line each.
func failerLog(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(raw)), "\n")
}

// linesFrom counts the lines of log, from the n-th on, that start with
// prefix.
func linesFrom(log []string, n int, prefix string) int {
	count := 0
	for _, l := range log[min(n, len(log)):] {
		if strings.HasPrefix(l, prefix) {
			count++
		}
	}
	return count
}

// TestCRIOStatusAndCheck: what CRI-O's STATUS and CHECK get from Catena.
//
//   - STATUS: CRI-O polls STATUS of its default network every 500 ms until
//     it succeeds; until then its CRI Status reports NetworkReady false
//     with Catena's message naming the delegate that is not ready, and no
//     GC is sent. Once the delegate is ready, so is the network, and the
//     start's GC follows.
//   - CHECK: CRI-O sends CHECK after every ADD, and again for every
//     sandbox it restores after a restart; Catena forwards it to its
//     delegates with the recorded result.
//   - CHECK of an attachment whose record is gone: Catena answers code 3
//     without invoking a delegate, and CRI-O, restoring, logs that it
//     could not restore the sandbox's IP and reports none; the plain
//     conflist, its libcni cache entry gone, answers with bridge's
//     "Required prevResult missing", with the same outcome in CRI-O.
//   - DEL of that attachment: no record, but CRI-O passes the result
//     libcni cached at ADD, so Catena DELs every delegate best-effort
//     (with CNI_NETNS, its eth0 holding that result's address) and
//     host-local frees the IP, as the plain conflist's DEL does.
func TestCRIOStatusAndCheck(t *testing.T) {
	w := newWorld(t)
	net, plainNet := "criostatus-"+w.id, "criocheckplain-"+w.id
	dir := t.TempDir()
	fault, flog := filepath.Join(dir, "not-ready"), filepath.Join(dir, "failer.log")
	touch(t, fault)
	slow := failer(fmt.Sprintf(`"failStatus":true,"faultFile":%q,"logFile":%q`, fault, flog))
	c := startCRIO(t, w, string(w.catenaList(net, "1.1.0", w.bridgeDelegate(), slow).Bytes))

	// STATUS before the delegate is ready: polled, failing, no GC yet.
	c.eventually("CRI-O has polled STATUS 3 times", 30*time.Second, func() error {
		if n := linesFrom(failerLog(t, flog), 0, "STATUS "); n < 3 {
			return fmt.Errorf("%d STATUS calls", n)
		}
		return nil
	})
	ready, msg := c.networkReady()
	assert.False(t, ready, "a delegate is not ready")
	assert.Contains(t, msg, "delegate 1 (failer)", "Catena names the delegate")
	assert.Contains(t, msg, "failer: injected STATUS failure")
	all, _ := gcOps(t, w.cacheDir)
	assert.Zero(t, all, "CRI-O sends no GC before STATUS succeeds")

	require.NoError(t, os.Remove(fault))
	c.waitNetworkReady()
	c.eventually("the start's GC reaches Catena", 30*time.Second, func() error {
		if all, _ := gcOps(t, w.cacheDir); all != 1 {
			return fmt.Errorf("%d GCs", all)
		}
		return nil
	})
	statuses := linesFrom(failerLog(t, flog), 0, "STATUS ")

	// CHECK after ADD.
	kept, lost := c.mustRunPod("check-kept", 0), c.mustRunPod("check-lost", 0)
	ips := map[string]string{}
	for _, id := range []string{kept, lost} {
		_, ip, netns, err := c.podStatus(id)
		require.NoError(t, err)
		require.NotEmpty(t, ip)
		ips[id] = ip
		log := failerLog(t, flog)
		assert.Contains(t, log, fmt.Sprintf("ADD %s eth0 %s", id, netns))
		assert.Contains(t, log, fmt.Sprintf("CHECK %s eth0 %s", id, netns), "CRI-O CHECKs after ADD; Catena forwards it")
		checks := opsFor(catenaOps(t, w.cacheDir), "CHECK", id)
		require.Len(t, checks, 1)
		assert.Equal(t, "ok", checks[0].Outcome)
	}
	assert.Len(t, w.ipamFiles(net), 2)
	assert.Len(t, w.hostVeths(), 2)

	// CHECK after a restart, one record gone.
	removeRecord(t, w, net, lost)
	before := len(failerLog(t, flog))
	c.restart(syscall.SIGTERM) // CRI-O restores its sandboxes before it serves the CRI API
	c.waitNetworkReady()
	assert.Contains(t, c.log(), "Could not restore sandbox IP for "+lost, "CRI-O's restore CHECK failed")
	assert.NotContains(t, c.log(), "Could not restore sandbox IP for "+kept)
	log := failerLog(t, flog)
	assert.Equal(t, 1, linesFrom(log, before, "CHECK "+kept), "the restored sandbox is CHECKed through Catena")
	assert.Zero(t, linesFrom(log, before, "CHECK "+lost), "no record: Catena invokes no delegate")
	assert.Positive(t, linesFrom(log, before, "STATUS "), "the new CRI-O polls STATUS again")
	assert.Greater(t, linesFrom(log, 0, "STATUS "), statuses)
	checks := opsFor(catenaOps(t, w.cacheDir), "CHECK", lost)
	require.Len(t, checks, 2)
	assert.Equal(t, "error", checks[1].Outcome)
	assert.Contains(t, c.log(), "no record: the attachment was never added or was deleted", "Catena's answer reaches CRI-O")
	_, ip, _, err := c.podStatus(kept)
	require.NoError(t, err)
	assert.Equal(t, ips[kept], ip, "CRI-O restored the IP of the sandbox that checks out")
	_, ip, _, err = c.podStatus(lost)
	require.NoError(t, err)
	assert.Empty(t, ip, "CRI-O restored no IP for the sandbox whose CHECK failed")

	for _, id := range []string{kept, lost} {
		require.NoError(t, c.stopPod(id), c.logTail())
		require.NoError(t, c.removePod(id), c.logTail())
	}
	assert.Empty(t, w.records(net))
	assert.Empty(t, w.hostVeths())
	// The lost record's DEL finds no record and nothing to adopt
	// (libcniResultsDir: Catena's own libcni entry is not adopted), but
	// CRI-O hands it the result libcni cached at ADD: Catena DELs every
	// delegate best-effort, and host-local frees the IP by container ID,
	// as the plain conflist's DEL would. CRI-O DELs before it unmounts the
	// netns, whose eth0 still holds the result's address: that proves it
	// the ADD's namespace, and the delegates get its path.
	assert.Empty(t, w.ipamFiles(net), "the IP of the sandbox whose record was lost is freed too")
	log = failerLog(t, flog)
	assert.Equal(t, 1, linesFrom(log, 0, "DEL "+lost+" eth0 /"), "the failer's DEL names the proven netns")
	assert.NotContains(t, log, fmt.Sprintf("DEL %s eth0 -", lost))
	dels := opsFor(catenaOps(t, w.cacheDir), "DEL", lost)
	require.NotEmpty(t, dels)
	for i, op := range dels {
		assert.Equal(t, "ok", op.Outcome, "DEL %d", i+1)
		if i > 0 {
			assert.Nil(t, op.NoRecordRelease, "DEL %d: libcni forgot the result after the first DEL: nothing invoked", i+1)
			assert.Empty(t, op.Calls, "DEL %d", i+1)
			continue
		}
		require.NotNil(t, op.NoRecordRelease, "the journal says the first DEL released")
		assert.Equal(t, 2, op.NoRecordRelease.Delegates)
		assert.Equal(t, events.ReleaseReleased, op.NoRecordRelease.Outcome, op.NoRecordRelease.Reason)
		assert.True(t, op.NoRecordRelease.WithNetNS)
		assert.Empty(t, op.NoRecordRelease.Failed)
		require.Len(t, op.Calls, 2)
		assert.Equal(t, []string{"failer", "bridge"}, []string{op.Calls[0].Type, op.Calls[1].Type}, "in reverse")
	}

	// The plain conflist, its libcni cache entry gone.
	c.switchNetwork(plainNet, string(w.plainList(plainNet, "1.1.0", w.bridgeDelegate()).Bytes))
	plain := c.mustRunPod("check-plain", 0)
	_, plainIP, _, err := c.podStatus(plain)
	require.NoError(t, err)
	entries, err := filepath.Glob(filepath.Join(libcniResults, plainNet+"-"+plain+"-eth0"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "libcni cached the plain ADD's result")
	require.NoError(t, os.Remove(entries[0]))
	c.restart(syscall.SIGTERM)
	c.waitNetworkReady()
	assert.Contains(t, c.log(), "Could not restore sandbox IP for "+plain, "CRI-O's restore CHECK failed")
	assert.Contains(t, c.log(), "Required prevResult missing", "bridge's CHECK answer reaches CRI-O")
	_, ip, _, err = c.podStatus(plain)
	require.NoError(t, err)
	assert.Empty(t, ip, "no IP restored")
	require.NoError(t, c.stopPod(plain), c.logTail())
	require.NoError(t, c.removePod(plain), c.logTail())
	assert.NotContains(t, w.ipamFiles(plainNet), plainIP, "host-local frees the plain sandbox's IP by its container ID")
}

// removeRecord deletes Catena's record of sandbox id, as a lost cache
// would.
func removeRecord(t *testing.T, w *world, network, id string) {
	t.Helper()
	for _, r := range w.records(network) {
		if strings.Contains(r, id) {
			require.NoError(t, os.Remove(r))
			return
		}
	}
	t.Fatalf("no record of %s in %v", id, w.records(network))
}
