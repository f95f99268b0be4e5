package faultfs

import (
	"errors"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, fsys afero.Fs, name, data string, sync bool) {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(t, err)
	_, err = f.Write([]byte(data))
	require.NoError(t, err)
	if sync {
		require.NoError(t, f.Sync())
	}
	require.NoError(t, f.Close())
}

func syncDir(t *testing.T, fsys afero.Fs, name string) {
	t.Helper()
	d, err := fsys.Open(name)
	require.NoError(t, err)
	require.NoError(t, d.Sync())
	require.NoError(t, d.Close())
}

// content returns the file's content, or "<absent>".
func content(t *testing.T, fsys afero.Fs, name string) string {
	t.Helper()
	data, err := afero.ReadFile(fsys, name)
	if errors.Is(err, os.ErrNotExist) {
		return "<absent>"
	}
	require.NoError(t, err)
	return string(data)
}

func TestCrashFsDurability(t *testing.T) {
	c := NewCrashFs()
	require.NoError(t, c.Mkdir("/d", 0o700))
	syncDir(t, c, "/")
	writeFile(t, c, "/d/synced", "one\n", true)             // data synced, entry not yet
	writeFile(t, c, "/d/unsynced", "lost", false)           // neither
	syncDir(t, c, "/d")                                     // both entries durable now
	writeFile(t, c, "/d/synced", "two-two\n", false)        // an append, not synced
	writeFile(t, c, "/d/late", "late", true)                // data synced, entry not
	require.NoError(t, c.Rename("/d/unsynced", "/d/moved")) // rename not durable
	require.NoError(t, c.Mkdir("/e", 0o700))                // entry not durable

	tests := []struct {
		mode                          Mode
		synced, unsynced, moved, late string
		e                             bool
	}{
		{ProcessKill, "one\ntwo-two\n", "<absent>", "lost", "late", true},
		{PowerLoss, "one\n", "", "<absent>", "<absent>", false},
		{PowerLossTornTail, "one\ntwo-", "lo", "<absent>", "<absent>", false},
		{PowerLossZeroTail, "one\n\x00\x00\x00\x00\x00\x00\x00\x00", "\x00\x00\x00\x00", "<absent>", "<absent>", false},
		{PowerLossMetadata, "one\n", "<absent>", "", "late", true},
	}
	for _, tt := range tests {
		t.Run(tt.mode.String(), func(t *testing.T) {
			img := c.Image(tt.mode)
			assert.Equal(t, tt.synced, content(t, img, "/d/synced"))
			assert.Equal(t, tt.unsynced, content(t, img, "/d/unsynced"))
			assert.Equal(t, tt.moved, content(t, img, "/d/moved"))
			assert.Equal(t, tt.late, content(t, img, "/d/late"))
			_, err := img.Stat("/e")
			assert.Equal(t, tt.e, err == nil, "mkdir of /e: %v", err)
			// An image is fully durable: a second crash changes nothing.
			again := img.Image(PowerLoss)
			assert.Equal(t, content(t, img, "/d/synced"), content(t, again, "/d/synced"))
		})
	}
}

func TestCrashFsRemoveNeedsDirSync(t *testing.T) {
	c := NewCrashFs()
	writeFile(t, c, "/f", "x", true)
	syncDir(t, c, "/")
	require.NoError(t, c.Remove("/f"))
	assert.Equal(t, "x", content(t, c.Image(PowerLoss), "/f"), "the removal is not durable yet")
	assert.Equal(t, "<absent>", content(t, c.Image(ProcessKill), "/f"))
	syncDir(t, c, "/")
	assert.Equal(t, "<absent>", content(t, c.Image(PowerLoss), "/f"))
}

func TestCrashFsCrashAfter(t *testing.T) {
	c := NewCrashFs()
	writeFile(t, c, "/f", "a", true) // open, write, sync, close
	require.Equal(t, 4, c.Ops())
	var hooks atomic.Int32
	c.CrashAfter(5, func() { hooks.Add(1) })
	require.NoError(t, c.Mkdir("/d", 0o700)) // operation 5 completes

	done := make(chan error, 2)
	go func() { done <- c.Mkdir("/e", 0o700) }()
	<-c.Crashed()
	go func() { _, err := c.Stat("/f"); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("a call returned before Release: %v", err)
	default:
	}
	assert.Equal(t, int32(1), hooks.Load())
	assert.Equal(t, 5, c.Ops())
	c.Release()
	c.Release()
	for range 2 {
		assert.ErrorIs(t, <-done, ErrCrashed)
	}
	_, err := c.Open("/f")
	assert.ErrorIs(t, err, ErrCrashed, "the machine stays down")
	assert.Equal(t, int32(1), hooks.Load())
	assert.Len(t, c.Trace(), 5)
	img := c.Image(ProcessKill)
	_, err = img.Stat("/e")
	assert.ErrorIs(t, err, os.ErrNotExist, "the crashing operation had no effect")
	_, err = img.Stat("/d")
	assert.NoError(t, err)
}

func TestCrashFsSemantics(t *testing.T) {
	c := NewCrashFs()
	_, err := c.OpenFile("/missing/f", os.O_CREATE|os.O_WRONLY, 0o600)
	assert.ErrorIs(t, err, os.ErrNotExist)
	require.NoError(t, c.MkdirAll("/a/b", 0o700))
	require.NoError(t, c.MkdirAll("/a/b", 0o700))
	assert.ErrorIs(t, c.Mkdir("/a", 0o700), os.ErrExist)
	writeFile(t, c, "/a/b/f", "hello", false)
	_, err = c.OpenFile("/a/b/f", os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	assert.ErrorIs(t, err, os.ErrExist)
	_, err = c.OpenFile("/a/b", os.O_WRONLY, 0)
	assert.ErrorIs(t, err, syscall.EISDIR)
	assert.ErrorIs(t, c.Remove("/a"), syscall.ENOTEMPTY)
	assert.ErrorIs(t, c.Mkdir("/a/b/f/x", 0o700), syscall.ENOTDIR)

	fi, err := c.Stat("/a/b/f")
	require.NoError(t, err)
	assert.Equal(t, "f", fi.Name())
	assert.Equal(t, int64(5), fi.Size())
	assert.Equal(t, os.FileMode(0o600), fi.Mode())
	require.NoError(t, c.Chmod("/a/b/f", 0o644))
	fi, err = c.Stat("/a/b/f")
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), fi.Mode())

	f, err := c.Open("/a/b/f")
	require.NoError(t, err)
	buf := make([]byte, 3)
	n, err := f.ReadAt(buf, 3)
	assert.Equal(t, 2, n)
	assert.ErrorIs(t, err, io.EOF)
	_, err = f.Write([]byte("x"))
	assert.ErrorIs(t, err, syscall.EBADF, "read-only handle")
	require.NoError(t, f.Close())
	_, err = f.Read(buf)
	assert.ErrorIs(t, err, os.ErrClosed)

	writeFile(t, c, "/a/b/g", "g", false)
	names, err := afero.ReadDir(c, "/a/b")
	require.NoError(t, err)
	require.Len(t, names, 2)
	assert.Equal(t, "f", names[0].Name())
	assert.Equal(t, "g", names[1].Name())

	// A rename keeps the open handle's file, and replaces the target.
	w, err := c.OpenFile("/a/b/g", os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	require.NoError(t, c.Rename("/a/b/g", "/a/b/f"))
	_, err = w.Write([]byte("2"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	assert.Equal(t, "g2", content(t, c, "/a/b/f"))
	assert.Equal(t, "<absent>", content(t, c, "/a/b/g"))
	assert.ErrorIs(t, c.Rename("/a/b/f", "/a"), syscall.EISDIR)
	require.NoError(t, c.RemoveAll("/a"))
	require.NoError(t, c.RemoveAll("/a"))
	assert.Equal(t, "<absent>", content(t, c, "/a/b/f"))
}

// TestCrashFsOverwriteInPlace: a write over a preallocated file's zeros,
// not synced, is lost (PowerLoss, and ZeroTail: no size changed), torn to
// its first half (TornTail), or kept (ProcessKill); the file's size never
// changes. A synced overwrite survives every mode.
func TestCrashFsOverwriteInPlace(t *testing.T) {
	c := NewCrashFs()
	require.NoError(t, c.Mkdir("/d", 0o700))
	syncDir(t, c, "/")
	writeFile(t, c, "/d/f", "one\n\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00", true)
	syncDir(t, c, "/d")
	f, err := c.OpenFile("/d/f", os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("two\n"), 4)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	_, err = f.WriteAt([]byte("three!\n"), 8)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	tests := []struct {
		mode Mode
		want string
	}{
		{ProcessKill, "one\ntwo\nthree!\n\x00"},
		{PowerLoss, "one\ntwo\n\x00\x00\x00\x00\x00\x00\x00\x00"},
		{PowerLossTornTail, "one\ntwo\nthr\x00\x00\x00\x00\x00"},
		{PowerLossZeroTail, "one\ntwo\n\x00\x00\x00\x00\x00\x00\x00\x00"},
		{PowerLossMetadata, "one\ntwo\n\x00\x00\x00\x00\x00\x00\x00\x00"},
	}
	for _, tt := range tests {
		t.Run(tt.mode.String(), func(t *testing.T) {
			assert.Equal(t, tt.want, content(t, c.Image(tt.mode), "/d/f"))
		})
	}
}

// TestCrashFsTornSectors: an unsynced overwrite in place of three sectors
// keeps its later two and loses its first (the old bytes, zeros here).
func TestCrashFsTornSectors(t *testing.T) {
	c := NewCrashFs()
	require.NoError(t, c.Mkdir("/d", 0o700))
	syncDir(t, c, "/")
	writeFile(t, c, "/d/f", "one\n"+strings.Repeat("\x00", 4*Sector-4), true)
	syncDir(t, c, "/d")
	f, err := c.OpenFile("/d/f", os.O_RDWR, 0)
	require.NoError(t, err)
	entry := strings.Repeat("x", 3*Sector-5) + "\n"
	_, err = f.WriteAt([]byte(entry), 4)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	got := content(t, c.Image(PowerLossTornSectors), "/d/f")
	want := "one\n" + strings.Repeat("\x00", Sector-4) + entry[Sector-4:] + strings.Repeat("\x00", Sector)
	assert.True(t, want == got, "the later two sectors persist, the first does not")
}
