package retriertest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

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

// TestHoldKeepsRetriersOff: while a test holds the lock, catena's kicker
// finds it taken.
func TestHoldKeepsRetriersOff(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	Hold(t, dir)
	_, err := cache.TryRetrierLock(dir)
	assert.True(t, errors.Is(err, cache.ErrLocked), "%v", err)
}
