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

// TestRetrierLockStaysWithTheRetrier: the retrier takes its inherited lock
// and config over close-on-exec, so a delegate it runs that leaves a
// process behind (failer's daemonFile: a sleep in a session of its own)
// holds neither. Once the retrier has released the teardown and exited,
// the lock is free for the next retrier while that process still runs.
// Before, the process held the lock as its fd 3, and no retrier started
// for the cache dir while it lived.
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

	chain := fmt.Sprintf(`[{"type":"failer","failDel":true,"faultFile":%q,"daemonFile":%q}]`, fault, daemonFile)
	add := w.run(t, "ADD", cacheDir, chain)
	require.NoError(t, add.err, "stdout %s stderr %s", add.stdout, add.stderr)
	del := w.run(t, "DEL", cacheDir, chain)
	require.Error(t, del.err, "the DEL fails while the fault lasts: the teardown is pending")
	require.NoError(t, os.Remove(fault)) // the retrier's attempt, 1 s later, succeeds

	var retrier int
	for deadline := time.Now().Add(5 * time.Second); retrier == 0 && time.Now().Before(deadline); {
		pids, err := retriertest.PIDs(cacheDir)
		require.NoError(t, err)
		if len(pids) > 0 {
			retrier = pids[0]
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	require.NotZero(t, retrier, "the failed DEL started a retrier")
	lockCloexec := false
	for deadline := time.Now().Add(5 * time.Second); !lockCloexec && time.Now().Before(deadline); {
		var err error
		if lockCloexec, err = closeOnExec(retrier, 3); err != nil {
			break // it exited
		}
		time.Sleep(time.Millisecond)
	}
	assert.True(t, lockCloexec, "the retrier's lock, fd 3, is close-on-exec")

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
