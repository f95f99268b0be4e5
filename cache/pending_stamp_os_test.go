//go:build linux

package cache

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRetryDueFollowsTheStamp, on the real disk: no pending dir, no pass;
// a marker and no stamp, a pass; a stamp that says the next is due in 10 s,
// no pass until then, unless a marker is created or removed meanwhile (the
// dir's mtime changes); a torn stamp, a pass.
func TestRetryDueFollowsTheStamp(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "catena")
	s := NewDiskStore(afero.NewOsFs(), dir, NewFlockLocker(filepath.Join(dir, LocksDir)))
	now := time.Now()
	clock := func() time.Time { return now }
	k1 := Key{Network: "net", ContainerID: "c1", IfName: "eth0"}
	k2 := Key{Network: "net", ContainerID: "c2", IfName: "eth0"}

	due, err := s.RetryDue("net", now)
	require.NoError(t, err)
	assert.False(t, due, "nothing pending")

	require.NoError(t, s.NotePending(k1, PendingNote{Due: now.Add(10 * time.Second), Attempts: 1}))
	due, err = s.RetryDue("net", now)
	require.NoError(t, err)
	assert.True(t, due, "a marker and no stamp")

	st, err := s.StampRetry("net", clock, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, now.Add(10*time.Second).UnixNano(), st.Next.UnixNano())
	assert.NotZero(t, st.DirMtime)
	due, err = s.RetryDue("net", now)
	require.NoError(t, err)
	assert.False(t, due, "stamped: next in 10 s")
	due, err = s.RetryDue("net", now.Add(10*time.Second))
	require.NoError(t, err)
	assert.True(t, due, "the next is due")

	// A rewrite in place (a failed retry) leaves the stamp valid.
	require.NoError(t, s.NotePending(k1, PendingNote{Due: now.Add(20 * time.Second), Attempts: 2}))
	due, err = s.RetryDue("net", now)
	require.NoError(t, err)
	assert.False(t, due, "a marker rewritten in place")

	require.NoError(t, s.NotePending(k2, PendingNote{Due: now.Add(time.Second), Attempts: 1}))
	due, err = s.RetryDue("net", now)
	require.NoError(t, err)
	assert.True(t, due, "a new marker changes the dir")

	_, err = s.StampRetry("net", clock, time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.ClearPending(k2))
	due, err = s.RetryDue("net", now)
	require.NoError(t, err)
	assert.True(t, due, "a removed marker changes the dir")

	_, err = s.StampRetry("net", clock, time.Minute)
	require.NoError(t, err)
	stamp := filepath.Join(dir, pendingDir, "net", retryStampName)
	f, err := os.OpenFile(stamp, os.O_WRONLY|os.O_TRUNC, 0)
	require.NoError(t, err)
	_, err = f.WriteString("v1 12")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	due, err = s.RetryDue("net", now)
	require.NoError(t, err)
	assert.True(t, due, "a torn stamp")

	// The stamp is never a marker.
	pending, err := s.PendingTeardown("net", 10)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	assert.Equal(t, k1, pending[0].Key)
	fi, err := os.Lstat(stamp)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	require.NoError(t, s.Audit())

	// Nothing pending any more: clearing the last marker drops the stamp,
	// a pass drops it too, and the empty dir is never due.
	require.NoError(t, s.ClearPending(k1))
	assert.NoFileExists(t, stamp)
	require.NoError(t, s.NotePending(k1, PendingNote{Due: now, Attempts: 1}))
	_, err = s.StampRetry("net", clock, time.Minute)
	require.NoError(t, err)
	assert.FileExists(t, stamp)
	require.NoError(t, os.Remove(filepath.Join(dir, pendingDir, "net", "c1:eth0")))
	st, err = s.StampRetry("net", clock, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, RetryStamp{}, st)
	assert.NoFileExists(t, stamp)
	due, err = s.RetryDue("net", now)
	require.NoError(t, err)
	assert.False(t, due, "an empty pending dir")
}

// TestRetryStampHorizon: with nothing pending, or the next due far off,
// the stamp puts the next pass at most horizon ahead.
func TestRetryStampHorizon(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "catena")
	s := NewDiskStore(afero.NewOsFs(), dir, NewFlockLocker(filepath.Join(dir, LocksDir)))
	now := time.Now()
	k := Key{Network: "net", ContainerID: "c1", IfName: "eth0"}
	st, err := s.StampRetry("net", func() time.Time { return now }, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, RetryStamp{}, st, "no pending dir: nothing stamped")
	require.NoError(t, s.NotePending(k, PendingNote{Due: now.Add(time.Hour), Attempts: 9}))
	st, err = s.StampRetry("net", func() time.Time { return now }, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, now.Add(time.Minute).UnixNano(), st.Next.UnixNano())
}

// TestRetrierLockIsExclusive: one holder per cache dir; a second try
// fails with ErrLocked; closing releases it.
func TestRetrierLockIsExclusive(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "catena")
	l, err := TryRetrierLock(dir)
	require.NoError(t, err)
	_, err = TryRetrierLock(dir)
	require.ErrorIs(t, err, ErrLocked)
	require.NoError(t, l.Close())
	l2, err := TryRetrierLock(dir)
	require.NoError(t, err)
	require.NoError(t, l2.Close())
	fi, err := os.Lstat(filepath.Join(dir, RetrierLockName))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}
