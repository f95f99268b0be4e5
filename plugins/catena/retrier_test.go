package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/internal/retriertest"
)

// closeOnExec reports whether pid's fd is close-on-exec, from its fdinfo.
func closeOnExec(pid, fd int) (bool, error) {
	info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%d", pid, fd))
	if err != nil {
		return false, err
	}
	for line := range strings.Lines(string(info)) {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			return err == nil && flags&unix.O_CLOEXEC != 0, err
		}
	}
	return false, fmt.Errorf("no flags in fdinfo %d of %d", fd, pid)
}

// fdTargets are what pid's open fds refer to, by fd.
func fdTargets(t *testing.T, pid int) map[string]string {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	require.NoError(t, err)
	targets := map[string]string{}
	for _, fd := range fds {
		if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil {
			targets[fd.Name()] = target
		}
	}
	return targets
}

// pendingDue is when the pending marker of podnet's c1:eth0 in cacheDir
// says its teardown is next due: no retrier runs a delegate for it before.
func pendingDue(t *testing.T, cacheDir string) time.Time {
	t.Helper()
	note, err := os.ReadFile(filepath.Join(cacheDir, "pending", "podnet", "c1:eth0"))
	require.NoError(t, err)
	f := strings.Fields(string(note))
	require.Len(t, f, 3, "%q", note)
	due, err := strconv.ParseInt(f[1], 10, 64)
	require.NoError(t, err)
	return time.Unix(0, due)
}

// TestRetrierLockStaysWithTheRetrier: the retrier makes its inherited lock
// close-on-exec before it runs any delegate, and a delegate it runs that
// leaves a process behind (failer's daemonFile: a sleep in a session of
// its own) does not hold the lock. Once the retrier has released the
// teardown and exited, the lock is free for the next retrier while that
// process still runs. Before, the process held the lock as its fd 3, and
// no retrier started for the cache dir while it lived.
func TestRetrierLockStaysWithTheRetrier(t *testing.T) {
	w := newBoundsWorld(t)
	dir := t.TempDir()
	cacheDir := filepath.Join(dir, "cache")
	fault, daemonFile := filepath.Join(dir, "fault"), filepath.Join(dir, "daemon")
	require.NoError(t, os.WriteFile(fault, nil, 0o600))
	// Cleanups run last first: the retrier is gone before the process its
	// delegate left is killed, and both before dir is removed.
	t.Cleanup(func() {
		if data, err := os.ReadFile(daemonFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
				retriertest.Kill(t, pid)
			}
		}
	})
	t.Cleanup(func() { retriertest.Reap(t, cacheDir, 15*time.Second) })

	// The ADD fails and so does its rollback (the first failed attempt),
	// then the runtime's DEL (the second): the teardown is pending, due 2 s
	// later, and the DEL starts a retrier.
	chain := fmt.Sprintf(`[{"type":"failer","failDel":true,"faultFile":%q,"daemonFile":%q},{"type":"failer","failAdd":true}]`,
		fault, daemonFile)
	add := w.run(t, "ADD", cacheDir, chain)
	require.Error(t, add.err, "stdout %s", add.stdout)
	del := w.run(t, "DEL", cacheDir, chain)
	require.Error(t, del.err, "stdout %s", del.stdout)
	due := pendingDue(t, cacheDir)
	require.NoError(t, os.Remove(fault)) // the retrier's attempt, once due, succeeds

	var retrier int
	for retrier == 0 && time.Now().Before(due) {
		pids, err := retriertest.PIDs(cacheDir)
		require.NoError(t, err)
		if len(pids) > 0 {
			retrier = pids[0]
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	require.NotZero(t, retrier, "the failed DEL started a retrier, seen before the teardown is due")
	lockCloexec := false
	for !lockCloexec && time.Now().Before(due) {
		var err error
		lockCloexec, err = closeOnExec(retrier, 3)
		require.NoError(t, err, "the retrier runs until its attempt")
		time.Sleep(time.Millisecond)
	}
	assert.True(t, lockCloexec, "the retrier's lock, fd 3, is close-on-exec before it runs a delegate (due in %v)",
		time.Until(due))

	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(daemonFile); err == nil {
			break
		}
	}
	data, err := os.ReadFile(daemonFile)
	require.NoError(t, err, "the retrier's DEL ran and left its process")
	daemon, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err)
	assert.Empty(t, retriertest.Reap(t, cacheDir, 15*time.Second), "the retrier exits by itself")
	assert.NoFileExists(t, filepath.Join(cacheDir, "records", "podnet", "c1:eth0.json"), "released by the retrier")

	require.NoError(t, syscall.Kill(daemon, 0), "the delegate's process still runs")
	targets := fdTargets(t, daemon)
	t.Logf("fds of the delegate's leftover process: %v", targets)
	for fd, target := range targets {
		assert.NotEqual(t, filepath.Join(cacheDir, cache.RetrierLockName), target, "fd %s", fd)
	}
	lock, err := cache.TryRetrierLock(cacheDir)
	require.NoError(t, err, "the retrier lock is free once the retrier exited")
	require.NoError(t, lock.Close())
}
