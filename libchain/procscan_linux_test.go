package libchain

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
)

// namedNetNS creates the network namespace name with ip netns add, as a
// runtime pins a sandbox's, and deletes it in t.Cleanup unless the test
// did (delNetNS); it returns its path.
func namedNetNS(t *testing.T, name string) string {
	t.Helper()
	requireNetNSRoot(t)
	out, err := exec.Command("ip", "netns", "add", name).CombinedOutput()
	require.NoError(t, err, "ip netns add %s: %s", name, out)
	path := filepath.Join("/var/run/netns", name)
	t.Cleanup(func() {
		if _, err := os.Lstat(path); os.IsNotExist(err) {
			return
		}
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	return path
}

// delNetNS deletes the namespace name made by namedNetNS, as a runtime
// removes a sandbox's.
func delNetNS(t *testing.T, name string) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "del", name).CombinedOutput()
	require.NoError(t, err, "ip netns del %s: %s", name, out)
}

// sleepIn starts a sleep in the named namespace (ip netns exec, which
// execs it) and waits until it is there. It returns the sleep's pid and
// stop, which kills and reaps it; t.Cleanup stops it too (before the
// namespace is deleted), and Pdeathsig kills it with the test binary.
func sleepIn(t *testing.T, name, path string) (int, func()) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", name, "sleep", "120")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	var once sync.Once
	stop := func() {
		once.Do(func() {
			if err := cmd.Process.Kill(); err != nil {
				t.Errorf("killing the sleep in %s: %v", name, err)
			}
			_ = cmd.Wait() // killed: its exit status says so
		})
	}
	t.Cleanup(stop)
	want := nsInodeOf(t, path)
	// ip enters the netns, then execs sleep: wait for both, so that the
	// scan names the sleep.
	require.Eventually(t, func() bool {
		var st syscall.Stat_t
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid))
		return syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid), &st) == nil && st.Ino == want &&
			err == nil && strings.TrimSpace(string(comm)) == "sleep"
	}, 5*time.Second, 10*time.Millisecond, "the sleep runs in netns %s", name)
	return cmd.Process.Pid, stop
}

func nsInodeOf(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(path, &st))
	return st.Ino
}

// TestGCKeepsARecordWhoseNetNSHoldsARealProcess: the real scanner, over
// the real /proc, sees a sleep in a namespace that ip netns pins, and a
// GC with null keeps that namespace's record while the sleep runs; the
// record whose namespace ip netns pins with nothing in it is kept too (no
// proof under an empty list), and torn down once its namespace is
// deleted; the first, once its sleep is gone and its namespace deleted.
func TestGCKeepsARecordWhoseNetNSHoldsARealProcess(t *testing.T) {
	requireNetNSRoot(t)
	suffix := strconv.Itoa(os.Getpid())
	runningName, stoppedName := "catena-gcrun-"+suffix, "catena-gcstop-"+suffix
	runningPath := namedNetNS(t, runningName)
	stoppedPath := namedNetNS(t, stoppedName)
	pid, stop := sleepIn(t, runningName, runningPath)

	h := newHarness()
	c := newClock()
	h.eng.Now = c.now
	h.eng.Procs = ProcScanner{}
	conf := confWithValid(t, "null")
	for cid, path := range map[string]string{"running": runningPath, "stopped": stoppedPath} {
		r := req(conf, cid)
		r.Args.NetNS = path
		_, err := h.eng.Add(context.Background(), r)
		require.NoError(t, err)
		require.NotNil(t, h.record(t, r).NetNSID, "ADD records the identity of %s", path)
	}
	c.advance(time.Hour)
	h.exec.reset()

	rep, err := h.eng.CollectGarbage(context.Background(), gcReq(conf), GCOptions{Valid: mustParseValid(t, conf)})
	require.NoError(t, err)
	assert.Empty(t, rep.TornDown)
	require.Len(t, rep.Skipped, 2)
	reasons := map[string]string{}
	for _, s := range rep.Skipped {
		reasons[s.Key.ContainerID] = s.Reason
	}
	assert.Equal(t, fmt.Sprintf("netns %s still holds a process (pid %d (sleep))", runningPath, pid), reasons["running"])
	assert.Contains(t, reasons["stopped"], "the runtime listed no attachment, and netns "+stoppedPath+" still exists")
	h.record(t, req(conf, "running"))
	h.record(t, req(conf, "stopped"))

	delNetNS(t, stoppedName)
	stop()
	rep, err = h.eng.CollectGarbage(context.Background(), gcReq(conf), GCOptions{Valid: mustParseValid(t, conf)})
	require.NoError(t, err)
	assert.Equal(t, []cache.Key{keyOf(conf, "stopped")}, rep.TornDown, "its namespace is gone: %+v", rep.Skipped)
	h.noRecord(t, req(conf, "stopped"))
	h.record(t, req(conf, "running"))

	delNetNS(t, runningName)
	rep, err = h.eng.CollectGarbage(context.Background(), gcReq(conf), GCOptions{Valid: mustParseValid(t, conf)})
	require.NoError(t, err)
	assert.Equal(t, []cache.Key{keyOf(conf, "running")}, rep.TornDown, "no process is left, and its namespace is gone: %+v", rep.Skipped)
	h.noRecord(t, req(conf, "running"))
}

func mustParseValid(t *testing.T, conf *NetConf) []Attachment {
	t.Helper()
	valid, err := parseValid(conf.ValidAttachments, conf.Attachments)
	require.NoError(t, err)
	return valid
}

// BenchmarkProcScan is the cost of the look GC takes once before it tears
// down a record the runtime does not list, with the node's processes and
// threads (as /proc has them when it starts) and the namespaces it found.
func BenchmarkProcScan(b *testing.B) {
	tasks, err := filepath.Glob("/proc/[0-9]*/task/[0-9]*")
	require.NoError(b, err)
	pids := map[string]bool{}
	for _, task := range tasks {
		pids[filepath.Dir(filepath.Dir(task))] = true
	}
	var procs NetNSProcesses
	for b.Loop() {
		procs, err = ProcScanner{}.Scan()
		require.NoError(b, err)
	}
	b.ReportMetric(float64(len(pids)), "processes")
	b.ReportMetric(float64(len(tasks)), "threads")
	b.ReportMetric(float64(len(procs.In)), "netns")
}
