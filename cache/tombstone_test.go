//go:build linux

package cache

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTombstoneOnDisk: a tombstone is buried 0600 in a 0700 dir, read
// back, replaced by a second Bury, and gone after Unbury (twice is fine).
// A key too long for a file name is hashed as a record's is.
func TestTombstoneOnDisk(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	s, dir := newOsStore(t)
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, key := range []Key{testKey("abc"), testKey(strings.Repeat("x", 300))} {
		_, err := s.TombstoneOf(key)
		require.ErrorIs(t, err, ErrNotFound)
		require.NoError(t, s.Bury(Tombstone{Key: key, Released: at, By: "RETRY", IPs: []string{"10.0.0.1"}}))
		require.NoError(t, s.Bury(Tombstone{Key: key, Released: at.Add(time.Second), By: "GC", IPs: []string{"10.0.0.2"}}))
		got, err := s.TombstoneOf(key)
		require.NoError(t, err)
		assert.Equal(t, &Tombstone{Key: key, Released: at.Add(time.Second), By: "GC", IPs: []string{"10.0.0.2"}}, got)
		fi, err := os.Lstat(s.tombstonePath(key))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode())
		require.NoError(t, s.Unbury(key))
		require.NoError(t, s.Unbury(key))
		_, err = s.TombstoneOf(key)
		require.ErrorIs(t, err, ErrNotFound)
	}
	for _, d := range []string{filepath.Join(dir, tombstonesDir), filepath.Join(dir, tombstonesDir, "podnet")} {
		fi, err := os.Lstat(d)
		require.NoError(t, err)
		assert.Equal(t, os.ModeDir|0o700, fi.Mode(), d)
	}
}

// TestTombstoneUntrusted: a tombstone that is a symlink, is open to
// others, does not decode or names another key is an error, never
// ErrNotFound: the DEL that reads it keeps on that doubt.
func TestTombstoneUntrusted(t *testing.T) {
	key := testKey("abc")
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		plant func(t *testing.T, s *DiskStore, path string)
	}{
		{"a symlink", func(t *testing.T, s *DiskStore, path string) {
			target := filepath.Join(t.TempDir(), "elsewhere.json")
			require.NoError(t, os.WriteFile(target, []byte(`{}`), 0o600))
			require.NoError(t, os.Symlink(target, path))
		}},
		{"open to others", func(t *testing.T, s *DiskStore, path string) {
			require.NoError(t, s.Bury(Tombstone{Key: key, Released: at}))
			require.NoError(t, os.Chmod(path, 0o666))
		}},
		{"not JSON", func(t *testing.T, s *DiskStore, path string) {
			require.NoError(t, os.WriteFile(path, []byte("junk"), 0o600))
		}},
		{"another key's", func(t *testing.T, s *DiskStore, path string) {
			require.NoError(t, s.Bury(Tombstone{Key: testKey("other"), Released: at}))
			require.NoError(t, os.Rename(s.tombstonePath(testKey("other")), path))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newOsStore(t)
			path := s.tombstonePath(key)
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
			tt.plant(t, s, path)
			_, err := s.TombstoneOf(key)
			require.Error(t, err)
			assert.NotErrorIs(t, err, ErrNotFound)
		})
	}
}

// TestPruneTombstones: a network's tombstones older than maxAge, then
// beyond its maxCount newest, by the time each records; an unreadable one
// by its mtime; what is not a tombstone's name is left alone, and so is
// every other network's.
func TestPruneTombstones(t *testing.T) {
	s, dir := newOsStore(t)
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	bury := func(network, cid string, age time.Duration) Key {
		k := Key{Network: network, ContainerID: cid, IfName: "eth0"}
		require.NoError(t, s.Bury(Tombstone{Key: k, Released: now.Add(-age), By: "GC"}))
		return k
	}
	old := bury("podnet", "old", 8*day)
	bury("podnet", "a", 3*day)
	b := bury("podnet", "b", 2*day)
	c := bury("podnet", "c", day)
	other := bury("other", "x", 9*day)
	torn := filepath.Join(dir, tombstonesDir, "podnet", "torn:eth0.json")
	require.NoError(t, os.WriteFile(torn, []byte("{"), 0o600))
	require.NoError(t, os.Chtimes(torn, now.Add(-10*day), now.Add(-10*day)))
	foreign := filepath.Join(dir, tombstonesDir, "podnet", "README")
	require.NoError(t, os.WriteFile(foreign, []byte("x"), 0o600))

	pruned, err := s.PruneTombstones("podnet", now, 7*day, 2)
	require.NoError(t, err)
	assert.ElementsMatch(t, []Key{old, testKey("a"), {}}, pruned, "the old one, the unreadable one (no key), and a beyond the 2 newest")
	for _, k := range []Key{b, c, other} {
		_, err := s.TombstoneOf(k)
		require.NoError(t, err, "%s kept", k)
	}
	assert.FileExists(t, foreign)
	assert.NoFileExists(t, torn)

	pruned, err = s.PruneTombstones("other", now, 7*day, 2)
	require.NoError(t, err)
	assert.Equal(t, []Key{other}, pruned, "its own network's GC prunes it")
	pruned, err = s.PruneTombstones("none", now, 7*day, 2)
	require.NoError(t, err)
	assert.Empty(t, pruned, "a network with no tombstones")
	_, err = s.PruneTombstones("bad/name", now, 7*day, 2)
	require.Error(t, err)
}
