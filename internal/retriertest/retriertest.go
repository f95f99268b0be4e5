//go:build linux

package retriertest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/catena-cni/catena/internal/proctest"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain"
)

// PIDs are the retrier processes of cacheDir: those run with
// libchain.RetrierArg whose fd 3 is cacheDir's retrier lock. A retrier's
// child between its fork and its exec (a delegate being started) has the
// same command line and fds for that moment; it is not a second retrier,
// and is left out: a process whose parent is one of them.
func PIDs(cacheDir string) ([]int, error) {
	lock := filepath.Join(cacheDir, cache.RetrierLockName)
	procs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	parents := map[int]int{} // pid -> ppid, of the live processes that look like one
	for _, p := range procs {
		cmdline, err := os.ReadFile(filepath.Join(p, "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte("\x00"+libchain.RetrierArg+"\x00")) {
			continue
		}
		if target, err := os.Readlink(filepath.Join(p, "fd", "3")); err == nil && target == lock {
			pid, err := strconv.Atoi(filepath.Base(p))
			if err != nil {
				continue
			}
			if state, ppid, err := proctest.Stat(pid); err == nil && !proctest.Dead(state) {
				parents[pid] = ppid
			}
		}
	}
	var pids []int
	for pid, ppid := range parents {
		if _, forked := parents[ppid]; !forked {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids, nil
}

// Reap waits up to within for cacheDir's retriers to exit, then kills
// those left (Kill). It returns the PIDs it killed.
func Reap(t testing.TB, cacheDir string, within time.Duration) []int {
	t.Helper()
	pids := func() []int {
		p, err := PIDs(cacheDir)
		if err != nil {
			t.Errorf("finding the retriers of %s: %v", cacheDir, err)
		}
		return p
	}
	for deadline := time.Now().Add(within); len(pids()) > 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	killed := pids()
	for _, pid := range killed {
		t.Logf("killing retrier %d of %s, still running", pid, cacheDir)
		Kill(t, pid)
	}
	return killed
}

// Kill sends SIGKILL to pid and waits until it is gone: reaped, or a
// zombie (a detached process is not the test's child, init reaps it).
func Kill(t testing.TB, pid int) {
	t.Helper()
	if pid <= 1 {
		t.Errorf("not killing pid %d", pid)
		return
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		if !errors.Is(err, syscall.ESRCH) {
			t.Errorf("killing %d: %v", pid, err)
		}
		return
	}
	for deadline := time.Now().Add(10 * time.Second); !proctest.Gone(t, pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("process %d still there 10 s after SIGKILL", pid)
			return
		}
	}
}

// Hold takes cacheDir's retrier lock for the rest of the test, as
// catena-agent does while it runs, so that no catena call of the test
// starts a retrier. At cleanup (before a t.TempDir made earlier is
// removed) it fails the test if a retrier of cacheDir runs anyway, kills
// it, and releases the lock.
func Hold(t testing.TB, cacheDir string) {
	t.Helper()
	lock, err := cache.TryRetrierLock(cacheDir)
	if err != nil {
		t.Fatalf("taking the retrier lock of %s: %v", cacheDir, err)
	}
	t.Cleanup(func() {
		if killed := Reap(t, cacheDir, 0); len(killed) > 0 {
			t.Errorf("retriers %v of %s ran though the test held the lock", killed, cacheDir)
		}
		if err := lock.Close(); err != nil {
			t.Error(err)
		}
	})
}
