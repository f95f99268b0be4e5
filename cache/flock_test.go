//go:build linux

package cache

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFlockLockFileLifecycle(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	base := t.TempDir() // made 0777 under this umask: the cache dir must be private
	require.NoError(t, os.Chmod(base, 0o700))
	dir := filepath.Join(base, "locks")
	l := NewFlockLocker(dir)
	key := testKey("abc")
	path := filepath.Join(dir, "podnet", "abc:eth0.lock")

	u, err := l.Lock(t.Context(), key, Holder{PID: 4242, Verb: "ADD"})
	require.NoError(t, err)
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode())
	fi, err = os.Lstat(filepath.Dir(path))
	require.NoError(t, err)
	assert.Equal(t, os.ModeDir|0o700, fi.Mode())
	h := l.readHolder(key)
	require.NotNil(t, h)
	assert.Equal(t, 4242, h.PID)
	assert.Equal(t, "ADD", h.Verb)

	require.NoError(t, u.Unlock())
	_, err = os.Lstat(path)
	assert.ErrorIs(t, err, os.ErrNotExist, "the lock file is gone after Unlock")
}

func TestFlockStaleHolderFileIsOverwritten(t *testing.T) {
	dir := t.TempDir()
	l := NewFlockLocker(dir)
	key := testKey("abc")
	path := filepath.Join(dir, "podnet", "abc:eth0.lock")
	// A holder that died leaves its file, unlocked, with a longer content.
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte(`{"pid":999999,"verb":"A-VERY-LONG-VERB-FROM-THE-DEAD","since":"2020-01-01T00:00:00Z"}`), 0o600))
	u, err := l.TryLock(key, Holder{Verb: "DEL"})
	require.NoError(t, err, "a file nobody flocks is free, whatever it says")
	h := l.readHolder(key)
	require.NotNil(t, h)
	assert.Equal(t, os.Getpid(), h.PID)
	assert.Equal(t, "DEL", h.Verb)
	require.NoError(t, u.Unlock())
}

func TestFlockRefusesSymlinkedLockFile(t *testing.T) {
	dir := t.TempDir()
	l := NewFlockLocker(dir)
	target := filepath.Join(t.TempDir(), "target")
	require.NoError(t, os.WriteFile(target, []byte("precious"), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "podnet"), 0o700))
	require.NoError(t, os.Symlink(target, filepath.Join(dir, "podnet", "abc:eth0.lock")))
	_, err := l.TryLock(testKey("abc"), Holder{Verb: "ADD"})
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrLocked)
	data, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "precious", string(data))
}

func TestFlockUnknownHolder(t *testing.T) {
	dir := t.TempDir()
	l := NewFlockLocker(dir)
	key := testKey("abc")
	u, err := l.TryLock(key, Holder{Verb: "ADD"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = u.Unlock() })
	require.NoError(t, os.Truncate(filepath.Join(dir, "podnet", "abc:eth0.lock"), 0))
	_, err = l.TryLock(key, Holder{Verb: "DEL"})
	var le *LockedError
	require.ErrorAs(t, err, &le)
	assert.Nil(t, le.Holder)
	assert.Contains(t, err.Error(), "unknown holder")
}

// TestFlockHelperProcess is not a test: it is the body of the subprocess of
// TestFlockAcrossProcesses. It takes the lock, says so, and waits to die.
func TestFlockHelperProcess(t *testing.T) {
	dir := os.Getenv("CATENA_FLOCK_HELPER_DIR")
	if dir == "" {
		t.Skip("helper process only")
	}
	u, err := NewFlockLocker(dir).TryLock(testKey("abc"), Holder{Verb: "ADD"})
	if err != nil {
		_, _ = os.Stdout.WriteString("error: " + err.Error() + "\n")
		os.Exit(1)
	}
	_ = u
	_, _ = os.Stdout.WriteString("locked\n")
	time.Sleep(time.Minute)
	os.Exit(0)
}

// startLockHolder runs TestFlockHelperProcess in a child process, which
// takes abc's lock in dir as an ADD, and returns once the lock is held.
func startLockHolder(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFlockHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "CATENA_FLOCK_HELPER_DIR="+dir)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "locked\n", line)
	return cmd
}

func TestFlockAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a subprocess")
	}
	dir := t.TempDir()
	cmd := startLockHolder(t, dir)

	l := NewFlockLocker(dir)
	key := testKey("abc")
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := l.Lock(ctx, key, Holder{Verb: "DEL"})
	var le *LockedError
	require.ErrorAs(t, err, &le)
	require.NotNil(t, le.Holder)
	assert.Equal(t, cmd.Process.Pid, le.Holder.PID)
	assert.Equal(t, "ADD", le.Holder.Verb)

	// The holder dies without unlocking: the kernel releases its flock.
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	ctx, cancel = context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	u, err := l.Lock(ctx, key, Holder{Verb: "DEL"})
	require.NoError(t, err)
	require.NoError(t, u.Unlock())
}

// TestFlockStaleFdIsDetected replays the unlink race step by step: a waiter
// opened the lock file, then the holder unlinked it and released. The
// waiter's flock now succeeds on a nameless inode, and must be recognised as
// stale, both when the path is missing and when a new holder recreated it.
func TestFlockStaleFdIsDetected(t *testing.T) {
	dir := t.TempDir()
	l := NewFlockLocker(dir)
	key := testKey("abc")
	holder, err := l.TryLock(key, Holder{Verb: "ADD"})
	require.NoError(t, err)
	lf, err := l.lockFileOf(key)
	require.NoError(t, err)
	t.Cleanup(lf.close)
	waiterFd, err := lf.open() // the waiter's open, before the unlink
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(waiterFd) })
	require.Error(t, flockNB(waiterFd), "held")
	require.NoError(t, holder.Unlock()) // unlink, then release

	require.NoError(t, flockNB(waiterFd), "the nameless inode is free")
	current, err := lf.isCurrent(waiterFd)
	require.NoError(t, err)
	assert.False(t, current, "path is missing")

	newHolder, err := l.TryLock(key, Holder{Verb: "DEL"})
	require.NoError(t, err, "the stale flock does not block the path")
	current, err = lf.isCurrent(waiterFd)
	require.NoError(t, err)
	assert.False(t, current, "path names a new inode")
	require.NoError(t, newHolder.Unlock())
}
