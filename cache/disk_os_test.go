//go:build linux

package cache

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newOsStore(t *testing.T) (*DiskStore, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "catena")
	return NewDiskStore(afero.NewOsFs(), dir, NewMemLocker()), dir
}

func TestDiskStoreModesOnDisk(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	s, dir := newOsStore(t)
	key := testKey("abc")
	require.NoError(t, s.Save(sampleRecord(key)))
	fi, err := os.Lstat(s.Path(key))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode())
	for _, d := range []string{dir, filepath.Join(dir, "records"), filepath.Join(dir, "records", "podnet")} {
		fi, err := os.Lstat(d)
		require.NoError(t, err)
		assert.Equal(t, os.ModeDir|0o700, fi.Mode(), d)
	}
	require.NoError(t, os.WriteFile(s.Path(key), []byte("junk"), 0o600))
	q, err := s.Quarantine(key)
	require.NoError(t, err)
	fi, err = os.Lstat(filepath.Dir(q))
	require.NoError(t, err)
	assert.Equal(t, os.ModeDir|0o700, fi.Mode())
}

func TestDiskStoreRefusesSymlinkRecord(t *testing.T) {
	s, dir := newOsStore(t)
	key := testKey("abc")
	other := testKey("other")
	require.NoError(t, s.Save(sampleRecord(other)))
	target := s.Path(other)
	before, err := os.ReadFile(target)
	require.NoError(t, err)
	// A valid record of the right key, reachable only through a link.
	outside := filepath.Join(t.TempDir(), "outside.json")
	require.NoError(t, os.WriteFile(outside, mustEncode(t, sampleRecord(key)), 0o600))

	for _, tgt := range []string{target, outside} {
		require.NoError(t, os.Symlink(tgt, s.Path(key)))
		_, err = s.Load(key)
		require.ErrorIs(t, err, ErrCorrupt)
		assert.Contains(t, err.Error(), "symlink")

		q, err := s.Quarantine(key)
		require.NoError(t, err)
		fi, err := os.Lstat(q)
		require.NoError(t, err)
		assert.Equal(t, os.ModeSymlink, fi.Mode().Type(), "the link itself is moved")
		assert.Equal(t, filepath.Join(dir, "quarantine"), filepath.Dir(q))
	}
	after, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, before, after, "the link's target is untouched")
	_, err = os.Stat(outside)
	require.NoError(t, err)
	_, err = s.Load(other)
	require.NoError(t, err)
}

func TestDiskStoreRefusesSymlinkedNetworkDir(t *testing.T) {
	s, dir := newOsStore(t)
	key := testKey("abc")
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "abc:eth0.json"), mustEncode(t, sampleRecord(key)), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "records"), 0o700))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "records", "podnet")))

	_, err := s.Load(key)
	require.ErrorIs(t, err, ErrCorrupt)
	assert.ErrorIs(t, s.Save(sampleRecord(key)), ErrCorrupt)
	assert.ErrorIs(t, s.Remove(key), ErrCorrupt)
	keys, err := s.List()
	require.NoError(t, err)
	assert.Empty(t, keys, "a symlinked network dir is not followed")
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "nothing was written or removed through the link")

	q, err := s.Quarantine(key)
	require.NoError(t, err)
	fi, err := os.Lstat(q)
	require.NoError(t, err)
	assert.Equal(t, os.ModeSymlink, fi.Mode().Type())
	_, err = s.Load(key)
	require.ErrorIs(t, err, ErrNotFound)
	_, err = os.Stat(filepath.Join(outside, "abc:eth0.json"))
	require.NoError(t, err, "the link's target is untouched")
}

func TestDiskStoreRefusesUntrustedFiles(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, path string, data []byte)
		want    string
	}{
		{"group writable", func(t *testing.T, path string, data []byte) {
			require.NoError(t, os.Chmod(path, 0o620))
		}, "untrusted mode"},
		{"world readable", func(t *testing.T, path string, data []byte) {
			require.NoError(t, os.Chmod(path, 0o604))
		}, "untrusted mode"},
		{"fifo", func(t *testing.T, path string, data []byte) {
			require.NoError(t, os.Remove(path))
			require.NoError(t, syscall.Mkfifo(path, 0o600))
		}, "not a regular file"},
		{"empty", func(t *testing.T, path string, data []byte) {
			require.NoError(t, os.Truncate(path, 0))
		}, "empty"},
		{"torn", func(t *testing.T, path string, data []byte) {
			entries, err := unpad(data) // the only entry, cut in half
			require.NoError(t, err)
			require.NoError(t, os.Truncate(path, int64(len(entries)/2)))
		}, "bad envelope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newOsStore(t)
			key := testKey("abc")
			require.NoError(t, s.Save(sampleRecord(key)))
			data, err := os.ReadFile(s.Path(key))
			require.NoError(t, err)
			tt.prepare(t, s.Path(key), data)
			_, err = s.Load(key)
			require.ErrorIs(t, err, ErrCorrupt)
			assert.Contains(t, err.Error(), tt.want)
			assert.Contains(t, err.Error(), key.String())
		})
	}
}
