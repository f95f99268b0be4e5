package integration

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/catena-cni/catena/internal/retriertest"
	"github.com/catena-cni/catena/libchain"
)

// retrierPIDs are the catena retrier processes (catena --retry-pending)
// that hold cacheDir's retrier lock.
func retrierPIDs(t *testing.T, cacheDir string) []int {
	t.Helper()
	pids, err := retriertest.PIDs(cacheDir)
	require.NoError(t, err)
	return pids
}

// retrierGrace is how long a world's last cleanup lets its retriers finish
// before killing them (its netns and bridge are gone by then).
const retrierGrace = 2 * time.Second

// reapRetriers waits (bounded) for the retriers of cacheDir to exit, then
// kills what is left: a test leaves no process behind.
func reapRetriers(t *testing.T, cacheDir string, within time.Duration) {
	t.Helper()
	retriertest.Reap(t, cacheDir, within)
}

// hungAndFixable sets up the hung-and-fixable scenario on a world: one attachment
// whose DEL hangs (until its hang file is removed) and one whose DEL fails
// until its fault file is removed, both DELed once by the runtime and
// pending. It returns the healthy list for other pods.
func hungAndFixable(t *testing.T, w *world, net string, timeout time.Duration) (healthy *libcni.NetworkConfigList, hung, fixable *libcni.RuntimeConf, hang, fail string, failedAt time.Time) {
	tmp := t.TempDir()
	hang, fail = filepath.Join(tmp, "hang"), filepath.Join(tmp, "fail")
	for _, f := range []string{hang, fail} {
		require.NoError(t, os.WriteFile(f, nil, 0o600))
	}
	hanging := w.timedList(net, "10s", timeout.String(), w.bridgeDelegate(),
		failer(fmt.Sprintf(`"hangDel":"60s","faultFile":%q`, hang)))
	failing := w.timedList(net, "10s", timeout.String(), w.bridgeDelegate(),
		failer(fmt.Sprintf(`"failDel":true,"faultFile":%q`, fail)))
	healthy = w.timedList(net, "10s", timeout.String(), w.bridgeDelegate())
	hung, fixable = w.container("hung"), w.container("fixable")
	lists := map[*libcni.RuntimeConf]*libcni.NetworkConfigList{hung: hanging, fixable: failing}
	for _, rt := range []*libcni.RuntimeConf{hung, fixable} {
		_, err := w.cni.AddNetworkList(bg, lists[rt], rt)
		require.NoError(t, err)
		// Runs after the hang is lifted and the retriers are gone.
		t.Cleanup(func() { assert.NoError(t, w.cni.DelNetworkList(bg, lists[rt], rt)) })
	}
	t.Cleanup(func() { reapRetriers(t, w.cacheDir, 2*timeout) })
	t.Cleanup(func() { _ = os.Remove(hang) })
	for _, rt := range []*libcni.RuntimeConf{hung, fixable} {
		require.Error(t, w.cni.DelNetworkList(bg, lists[rt], rt))
	}
	failedAt = time.Now()
	require.Len(t, w.records(net), 2)
	require.NoError(t, os.Remove(fail)) // the fixable record can now be torn down
	return healthy, hung, fixable, hang, fail, failedAt
}

// TestNoADDWaitsForAForeignTeardown: on the real binary:
// a record whose DEL hangs until delegateTimeout and one whose DEL failed
// once, on the network of the ADDs that follow. No ADD waits for either
// teardown (before: each ADD retried a hung one, 3.07-3.09 s), and the
// fixable record is torn down without the runtime, by catena's detached
// retrier, within its backoff period plus one retry pass (before: never,
// over 90 s). catenactl list shows when each is next retried.
func TestNoADDWaitsForAForeignTeardown(t *testing.T) {
	w := newWorld(t)
	const (
		net     = "itretrier"
		timeout = 3 * time.Second // delegateTimeout
		adds    = 6
	)
	healthy, hung, fixable, _, _, failedAt := hungAndFixable(t, w, net, timeout)

	var took []time.Duration
	for i := range adds {
		rt := w.container(fmt.Sprintf("c%d", i))
		start := time.Now()
		_, err := w.cni.AddNetworkList(bg, healthy, rt)
		took = append(took, time.Since(start))
		require.NoError(t, err)
		w.delAtCleanup(healthy, rt)
	}
	t.Logf("ADD durations with a hung and a fixable pending teardown: %v", took)
	for i, d := range took {
		assert.Less(t, d, timeout/2, "ADD %d waited for a foreign teardown", i)
	}

	fixableRec := filepath.Join(w.cacheDir, "records", net, fixable.ContainerID+":eth0.json")
	deadline := failedAt.Add(time.Second + 5*time.Second + 10*time.Second) // backoff + one pass (a hung DEL) + slack
	for fileExists(fixableRec) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	assert.False(t, fileExists(fixableRec), "the fixable record is torn down by the retrier")
	t.Logf("fixable record released %v after its DEL failed", time.Since(failedAt).Round(time.Millisecond))

	c := &ctl{t: t, bin: catenactlBin(t), cniDir: cniPath, cacheDir: w.cacheDir}
	out, stderr, code := c.run("--cache-dir", w.cacheDir, "list", "--network", net)
	require.Equal(t, 0, code, stderr)
	var hungRow []string
	for _, r := range fields(out) {
		if len(r) > 1 && r[1] == hung.ContainerID {
			hungRow = r
		}
	}
	require.NotNil(t, hungRow, out)
	assert.Equal(t, "needs-teardown", hungRow[3], out)
	attempts, err := strconv.Atoi(hungRow[5])
	require.NoError(t, err, out)
	assert.GreaterOrEqual(t, attempts, 2, "the retrier attempted the hung one too: %s", out)
	assert.Regexp(t, `^(now|[0-9]+[smhd])$`, hungRow[6], "NEXT says when: %s", out)
}

// TestRetrierHoldsNothingOfTheRuntime: a runtime that gives catena a pipe
// for stdout and leaks one more pipe into it (as a runtime's fd without
// close-on-exec would) sees both closed as soon as catena exits, while
// the retrier it started goes on with a hung DEL in its own session, with
// /dev/null for stdio. Killed mid-DEL, the retrier leaves the record
// pending with its next attempt pushed out, and the next pass releases it.
func TestRetrierHoldsNothingOfTheRuntime(t *testing.T) {
	w := newWorld(t)
	const (
		net     = "itdetach"
		timeout = 5 * time.Second
	)
	healthy, hung, _, hang, _, _ := hungAndFixable(t, w, net, timeout)
	// The DELs above started a retrier: let it finish (it gives up on the
	// hung record once its next attempt is further off than it lingers),
	// wait until the hung record is due again, then call catena as a
	// runtime does.
	reapRetriers(t, w.cacheDir, libchain.DefaultRetryBudget+2*timeout)
	time.Sleep(time.Until(noteDue(t, w.cacheDir, net, hung.ContainerID)))

	stdin := healthyConfig(t, w, net, timeout)
	leakR, leakW, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { _ = leakR.Close() })
	rt := w.container("direct")
	cmd := exec.Command(filepath.Join(cniPath, "catena"))
	cmd.Env = append(os.Environ(), "CNI_COMMAND=ADD", "CNI_CONTAINERID="+rt.ContainerID, "CNI_NETNS="+rt.NetNS,
		"CNI_IFNAME=eth0", "CNI_PATH="+cniPath)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.ExtraFiles = []*os.File{leakW}
	start := time.Now()
	require.NoError(t, cmd.Start())
	require.NoError(t, leakW.Close())
	require.NoError(t, cmd.Wait(), "stdout: %s", stdout.String())
	took := time.Since(start)
	t.Cleanup(func() {
		del := exec.Command(filepath.Join(cniPath, "catena"))
		del.Env = append(os.Environ(), "CNI_COMMAND=DEL", "CNI_CONTAINERID="+rt.ContainerID, "CNI_NETNS="+rt.NetNS,
			"CNI_IFNAME=eth0", "CNI_PATH="+cniPath)
		del.Stdin = strings.NewReader(stdin)
		out, err := del.CombinedOutput()
		assert.NoError(t, err, "%s", out)
	})
	assert.Contains(t, stdout.String(), `"ips"`)
	assert.Less(t, took, timeout/2, "ADD with stdout closed and exited")

	eof := make(chan time.Duration, 1)
	go func() {
		_, _ = io.Copy(io.Discard, leakR)
		eof <- time.Since(start)
	}()
	select {
	case d := <-eof:
		t.Logf("ADD returned in %v; the leaked pipe closed %v after start", took, d)
	case <-time.After(timeout / 2):
		t.Fatal("the retrier holds the runtime's pipe")
	}

	var pids []int
	for deadline := time.Now().Add(3 * time.Second); len(pids) == 0 && time.Now().Before(deadline); {
		pids = retrierPIDs(t, w.cacheDir)
		time.Sleep(20 * time.Millisecond)
	}
	require.Len(t, pids, 1, "one retrier runs, holding the lock")
	pid := pids[0]
	sid, err := unix.Getsid(pid)
	require.NoError(t, err)
	assert.Equal(t, pid, sid, "the retrier leads its own session")
	for fd := range 3 {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd))
		require.NoError(t, err)
		assert.Equal(t, "/dev/null", target, "fd %d", fd)
	}

	// Kill it mid-DEL, once the hung delegate runs (its lease is taken
	// before): the record stays, its next attempt pushed out by the lease.
	waitPluginProc(t, hung.ContainerID, "failer", 2*timeout)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	reapRetriers(t, w.cacheDir, 2*time.Second)
	rec := filepath.Join(w.cacheDir, "records", net, hung.ContainerID+":eth0.json")
	require.True(t, fileExists(rec), "killed mid-DEL: the record stays")
	due := noteDue(t, w.cacheDir, net, hung.ContainerID)
	assert.True(t, due.After(time.Now()), "not due again at once after the kill: %v", due)

	// Healed: the next call's retrier releases it.
	require.NoError(t, os.Remove(hang))
	time.Sleep(time.Until(due))
	other := w.container("other")
	_, err = w.cni.AddNetworkList(bg, healthy, other)
	require.NoError(t, err)
	w.delAtCleanup(healthy, other)
	for deadline := time.Now().Add(3 * timeout); fileExists(rec) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	assert.False(t, fileExists(rec), "released by the next retrier")
}

// healthyConfig is the catena network config (not the list) of the healthy
// chain, as a runtime passes it on stdin.
func healthyConfig(t *testing.T, w *world, net string, timeout time.Duration) string {
	t.Helper()
	return fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"type":"catena","cacheDir":%q,"delegateTimeout":%q,"lockTimeout":"10s","logFile":%q,"delegates":[%s]}`,
		net, w.cacheDir, timeout.String(), w.logFile(), w.bridgeDelegate())
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// noteDue is when the pending note of cid's attachment says its teardown
// is next due.
func noteDue(t *testing.T, cacheDir, net, cid string) time.Time {
	t.Helper()
	note, err := os.ReadFile(filepath.Join(cacheDir, "pending", net, cid+":eth0"))
	require.NoError(t, err)
	f := strings.Fields(string(note))
	require.Len(t, f, 3, "%q", note)
	due, err := strconv.ParseInt(f[1], 10, 64)
	require.NoError(t, err)
	return time.Unix(0, due)
}
