package integration

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criSandboxPID is the sandbox's pause process, from the runtime's
// verbose PodSandboxStatus (containerd and CRI-O both give it as "pid" in
// the info's "info").
func criSandboxPID(t *testing.T, rt cri.RuntimeServiceClient, id string) int {
	t.Helper()
	st, err := rt.PodSandboxStatus(bg, &cri.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	require.NoError(t, err)
	var info struct {
		PID int `json:"pid"`
	}
	require.NoError(t, json.Unmarshal([]byte(st.GetInfo()["info"]), &info))
	require.Greater(t, info.PID, 1, "sandbox %s's pause PID", id)
	return info.PID
}

// sandboxPID is the sandbox's pause process.
func (d *containerd) sandboxPID(id string) int {
	d.t.Helper()
	return criSandboxPID(d.t, d.rt, id)
}

// killPause kills pid by PID if it is still a pause process.
func killPause(pid int) {
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err == nil && strings.TrimSpace(string(comm)) == "pause" {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// crash kills the containerd process by PID and nothing else: its shims
// and sandboxes live on, as when systemd stops containerd.
func (d *containerd) crash() {
	d.t.Helper()
	require.NoError(d.t, d.cmd.Process.Kill())
	<-d.exited
}

// wipeRootAndState deletes containerd's root and state: every mount under
// them is detached, except the sandboxes' network namespaces (nsfs), which
// cannot be deleted while they live, as they survive a wipe of
// /var/lib/containerd and /run/containerd on a node (they are under
// /var/run/netns there). It returns the network namespaces kept.
func (d *containerd) wipeRootAndState() []string {
	d.t.Helper()
	raw, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(d.t, err)
	keep := map[string]bool{}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		sep := -1
		for i, x := range f {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(f) || !strings.HasPrefix(f[4], d.dir+"/") {
			continue
		}
		if f[sep+1] == "nsfs" {
			keep[f[4]] = true
			continue
		}
		if err := syscall.Unmount(f[4], syscall.MNT_DETACH); err != nil {
			d.t.Logf("wipe: unmount %s: %v", f[4], err)
		}
	}
	for _, sub := range []string{"root", "state"} {
		_ = os.RemoveAll(filepath.Join(d.dir, sub)) // fails on the kept netns only: checked below
	}
	var kept []string
	for _, sub := range []string{"root", "state"} {
		err := filepath.WalkDir(filepath.Join(d.dir, sub), func(path string, e fs.DirEntry, err error) error {
			if os.IsNotExist(err) {
				return nil
			}
			require.NoError(d.t, err)
			if !e.IsDir() {
				require.True(d.t, keep[path], "wipe left %s, which is not a netns", path)
				kept = append(kept, path)
			}
			return nil
		})
		require.NoError(d.t, err)
	}
	return kept
}

// unpinNetns removes the network namespace files at paths (bind mounts of
// nsfs): each namespace goes with its last process.
func unpinNetns(t *testing.T, paths []string) {
	t.Helper()
	for _, p := range paths {
		require.NoError(t, syscall.Unmount(p, syscall.MNT_DETACH), "unmount %s", p)
		require.NoError(t, os.Remove(p))
	}
}

// restart starts containerd again on the same config and dirs, appending
// to its log, and waits until its CRI API answers.
func (d *containerd) restart() {
	d.t.Helper()
	d.startAgain()
	d.waitReady()
}

// startAgain starts containerd again on the same config and dirs,
// appending to its log, and returns at once.
func (d *containerd) startAgain() {
	d.t.Helper()
	logf, err := os.OpenFile(d.logPath, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(d.t, err)
	defer func() { _ = logf.Close() }()
	d.cmd = exec.Command(d.version.bin, "--config", filepath.Join(d.dir, "config.toml"), "--log-level", "info")
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.Env = append(os.Environ(), "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	d.exited = make(chan struct{})
	require.NoError(d.t, d.cmd.Start(), "restarting containerd %s", d.version.name)
	go func(cmd *exec.Cmd, exited chan struct{}) { _ = cmd.Wait(); close(exited) }(d.cmd, d.exited)
}

// TestReconcileRuntimeStateWiped: 3 sandboxes run through Catena (each with
// a hostPort); containerd is killed, its root and state deleted, and it is
// restarted knowing no sandbox, while `catena-agent run` reconciles every
// 500 ms with a 2 s grace. During the outage nothing is reclaimed. After
// the restart the runtime lists no sandboxes, but the lost sandboxes' pause
// processes still run (their shims outlive containerd) in the netns of
// their ADDs: for more than grace + 4 intervals nothing is marked or
// reclaimed, since an empty list proves nothing and a netns with a
// process in it is alive. Once those orphans are killed, every attachment
// Killed, they leave their netns pinned with no process in them, which
// under an empty list is no proof either (a pinned namespace outlives its
// processes): nothing is marked for grace + 4 intervals more. Once those
// pinned netns files go too, every attachment (IP, DNAT rule, record) is
// reclaimed within grace + 2 intervals (plus the teardowns' own time) of
// their removal, each exactly once.
func TestReconcileRuntimeStateWiped(t *testing.T) {
	const (
		sandboxes = 3
		interval  = 500 * time.Millisecond
		grace     = 2 * time.Second
	)
	onBothContainerds(t, func(t *testing.T, n *agentNode) {
		p := n.useChain(n.reconcileFlags(interval, grace), n.w.bridgeDelegate(), portmapDelegate)
		var ids []string
		var pauses []int
		for range sandboxes {
			id, err := n.d.runPod(n.d.podConfig("wiped", hostPort()))
			require.NoError(t, err, n.d.logTail())
			ids = append(ids, id)
			pid := n.d.sandboxPID(id)
			pauses = append(pauses, pid)
			t.Cleanup(func() { killPause(pid) })
		}
		created := time.Now()
		require.Len(t, n.w.ipamFiles(n.net), sandboxes)
		require.Len(t, n.w.hostVeths(), sandboxes)
		for _, id := range ids {
			require.Positive(t, iptablesMentions(t, id))
		}

		n.d.crash()
		netns := n.d.wipeRootAndState()
		require.Len(t, netns, sandboxes, "the sandboxes' netns outlive the wipe")
		// the outage lasts 2 intervals, and the records are older than
		// the grace when the runtime comes back
		time.Sleep(max(2*interval, grace-time.Since(created)))
		runtimeErrors := p.metric("catena_reconcile_runtime_errors_total")
		keptRuntime := p.metric("catena_reconcile_kept_total", "cause=runtime")
		require.Len(t, n.w.records(n.net), sandboxes, "nothing reclaimed while the runtime is down")
		assert.Positive(t, runtimeErrors, "passes met the runtime down")
		assert.Positive(t, keptRuntime, "and kept the records because of it")

		n.d.restart()
		assert.Empty(t, n.d.pods(), "the restarted containerd knows no sandbox")
		// the pause processes left behind keep the sandboxes alive
		orphaned := grace + 4*interval
		time.Sleep(orphaned)
		heldRecords, heldMarks := len(n.w.records(n.net)), 0
		for _, id := range ids {
			if exists(t, n.markPath(id)) {
				heldMarks++
			}
		}
		heldMarked, heldReclaimed := p.metric("catena_reconcile_marked_total"), p.metric("catena_reconcile_reclaimed_total")
		assert.Equal(t, sandboxes, heldRecords, "nothing reclaimed while the pause processes run")
		assert.Zero(t, heldMarks, "nor marked")
		assert.Zero(t, heldMarked+heldReclaimed)
		assert.Len(t, n.w.ipamFiles(n.net), sandboxes)
		for _, pid := range pauses {
			killPause(pid)
		}
		// their netns stay pinned, with no process in them: no proof
		time.Sleep(orphaned)
		pinnedMarks := 0
		for _, id := range ids {
			if exists(t, n.markPath(id)) {
				pinnedMarks++
			}
		}
		assert.Len(t, n.w.records(n.net), sandboxes, "nothing reclaimed while their netns are pinned")
		assert.Zero(t, pinnedMarks, "nor marked")
		assert.Zero(t, p.metric("catena_reconcile_marked_total")+p.metric("catena_reconcile_reclaimed_total"))
		unpinNetns(t, netns)
		took := p.waitFor("reclaimed", 30*time.Second, func() (bool, string) {
			left := len(n.w.records(n.net))
			return left == 0, fmt.Sprintf("%d records left", left)
		})
		reclaims := n.reclaimsCounted(p, sandboxes)
		var teardown time.Duration
		for _, op := range reclaims {
			assert.Equal(t, "ok", op.Outcome, "%+v", op)
			teardown += op.Duration
		}
		require.Len(t, reclaims, sandboxes, "one reclaim per lost attachment")
		bound := grace + 2*interval + teardown + 2*time.Second // 2 s: CRI calls, record reads, the 50 ms poll, on a loaded machine
		assert.LessOrEqual(t, took, bound, "reclaimed within grace + 2 intervals (+ the teardowns' %s)", teardown)
		ips, veths := len(n.w.ipamFiles(n.net)), len(n.w.hostVeths())
		rules := 0
		for _, id := range ids {
			rules += iptablesMentions(t, id)
		}
		assert.Zero(t, ips, "IPs released")
		assert.Zero(t, veths, "veths gone")
		assert.Zero(t, rules, "DNAT rules deleted")
		n.requireTombstones("RECLAIM", ids...)
		marked, reclaimed := p.metric("catena_reconcile_marked_total"), p.metric("catena_reconcile_reclaimed_total")
		assert.Equal(t, float64(sandboxes), marked)
		assert.Equal(t, float64(sandboxes), reclaimed)
		assert.Empty(t, n.opsOf("RETRY", "ABANDON"))
		fmt.Printf("reconcile wiped runtime, containerd %s: %d sandboxes lost (%d netns outlive the wipe); outage: %.0f passes with runtime errors, %.0f records kept, 0 reclaimed; "+
			"after the restart, 0 sandboxes listed, pause processes alive for %s: %d records, %d marks, %.0f marked, %.0f reclaimed; "+
			"pause processes killed, netns pinned for %s: %d marks; "+
			"netns removed: %.0f marked, %.0f reclaimed (%d RECLAIM ops, %s of teardown) in %s (bound %s = grace %s + 2 x %s + teardown + 500ms); left: %d IPs, %d veths, %d DNAT rules, %d records\n",
			n.v.name, sandboxes, len(netns), runtimeErrors, keptRuntime, orphaned, heldRecords, heldMarks, heldMarked, heldReclaimed,
			orphaned, pinnedMarks, marked, reclaimed, len(reclaims), teardown.Round(time.Millisecond),
			took.Round(time.Millisecond), bound.Round(time.Millisecond), grace, interval, ips, veths, rules, len(n.w.records(n.net)))
	})
}
