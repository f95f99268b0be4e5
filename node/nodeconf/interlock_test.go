package nodeconf

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDirLock: one holder at a time, the other told who holds it; Unlock
// removes the file; a holder whose conf dir was replaced takes the lock of
// the new dir; a missing dir is ErrNotExist.
func TestDirLock(t *testing.T) {
	dir := t.TempDir()
	a, b := NewDirLock(dir, "catena-agent run (pid 1)"), NewDirLock(dir, "catena-agent uninstall (pid 2)")
	ok, err := a.TryLock()
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = b.TryLock()
	assert.False(t, ok)
	require.ErrorIs(t, err, ErrHeld)
	assert.Contains(t, err.Error(), "catena-agent run (pid 1)")
	require.NoError(t, a.Unlock())
	assert.NoFileExists(t, filepath.Join(dir, LockName))
	ok, err = b.TryLock()
	require.NoError(t, err)
	require.True(t, ok)

	require.NoError(t, os.Rename(dir, dir+".old"))
	t.Cleanup(func() { _ = os.RemoveAll(dir + ".old") })
	require.NoError(t, os.Mkdir(dir, 0o755))
	ok, err = b.TryLock()
	require.NoError(t, err)
	require.True(t, ok, "relocked in the new dir")
	assert.FileExists(t, filepath.Join(dir, LockName))
	ok, err = a.TryLock()
	assert.False(t, ok, "the new dir's lock is held: %v", err)
	require.NoError(t, b.Unlock())

	_, err = NewDirLock(filepath.Join(dir, "missing"), "x").TryLock()
	assert.True(t, errors.Is(err, fs.ErrNotExist), "%v", err)
}
