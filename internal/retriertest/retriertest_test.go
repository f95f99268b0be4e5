package retriertest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/catena-cni/catena/internal/proctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain"
)

// TestReapKillsTheRetrierOfItsCacheDir: a process run with RetrierArg
// that holds a cache dir's retrier lock as fd 3 is that dir's retrier, not
// another's; Reap kills it and waits until it is gone.
func TestReapKillsTheRetrierOfItsCacheDir(t *testing.T) {
	dir, other := filepath.Join(t.TempDir(), "cache"), filepath.Join(t.TempDir(), "cache")
	lock, err := cache.TryRetrierLock(dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lock.Close() })
	// A shell blocked in its builtin read: no child of its own to leave.
	r, w, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close() })
	cmd := exec.Command("/bin/sh", "-c", "read x", "sh", libchain.RetrierArg)
	cmd.Stdin = r
	cmd.ExtraFiles = []*os.File{lock.File()}
	require.NoError(t, cmd.Start())
	require.NoError(t, r.Close())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	pids, err := PIDs(dir)
	require.NoError(t, err)
	assert.Equal(t, []int{cmd.Process.Pid}, pids)
	pids, err = PIDs(other)
	require.NoError(t, err)
	assert.Empty(t, pids, "another cache dir's")

	assert.Equal(t, []int{cmd.Process.Pid}, Reap(t, dir, 0))
	assert.True(t, proctest.Gone(t, cmd.Process.Pid))
	pids, err = PIDs(dir)
	require.NoError(t, err)
	assert.Empty(t, pids)
}

// TestPIDsLeavesOutAForkedChild: a retrier's child that has not exec'd
// yet (here a subshell, which never does) has the retrier's command line
// and its lock as fd 3; it is not counted as a second retrier.
func TestPIDsLeavesOutAForkedChild(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	lock, err := cache.TryRetrierLock(dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lock.Close() })
	r, w, err := os.Pipe()
	require.NoError(t, err)
	// The subshell reads the pipe (fd 4) in a builtin; the shell waits for it.
	cmd := exec.Command("/bin/sh", "-c", "(read x <&4; :) & wait", "sh", libchain.RetrierArg)
	cmd.ExtraFiles = []*os.File{lock.File(), r}
	require.NoError(t, cmd.Start())
	require.NoError(t, r.Close())
	t.Cleanup(func() { _ = w.Close(); _ = cmd.Wait() })

	var child int
	require.Eventually(t, func() bool {
		kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
		require.NoError(t, err)
		if f := strings.Fields(string(kids)); len(f) == 1 {
			child, err = strconv.Atoi(f[0])
			require.NoError(t, err)
			return true
		}
		return false
	}, 5*time.Second, 10*time.Millisecond, "the subshell starts")
	fd3, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/3", child))
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, cache.RetrierLockName), fd3, "the child holds the lock as fd 3 too")

	pids, err := PIDs(dir)
	require.NoError(t, err)
	assert.Equal(t, []int{cmd.Process.Pid}, pids)
}

// TestHoldKeepsRetriersOff: while a test holds the lock, catena's kicker
// finds it taken.
func TestHoldKeepsRetriersOff(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	Hold(t, dir)
	_, err := cache.TryRetrierLock(dir)
	assert.True(t, errors.Is(err, cache.ErrLocked), "%v", err)
}
