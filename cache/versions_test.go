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

func sampleBinary() BinaryID {
	return BinaryID{Path: "/opt/cni/bin/portmap", Dev: 2049, Ino: 4242, Size: 4_200_000,
		MtimeNs: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC).UnixNano()}
}

// TestVersionCacheHitAndInvalidation: an answer is returned for exactly
// the identity it was cached under; a change of any one field is a miss.
func TestVersionCacheHitAndInvalidation(t *testing.T) {
	fsys := afero.NewMemMapFs()
	c := NewVersionCache(fsys, "/var/lib/cni/catena")
	id := sampleBinary()
	got, ok, err := c.Get(id)
	require.NoError(t, err)
	assert.False(t, ok, "empty cache")
	assert.Nil(t, got)

	want := []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0"}
	require.NoError(t, c.Put(id, want))
	got, ok, err = c.Get(id)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, want, got)

	fi, err := fsys.Stat(c.path(id.Path))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	for name, change := range map[string]func(*BinaryID){
		"path":   func(b *BinaryID) { b.Path = "/opt/cni/bin/other/../portmap" },
		"device": func(b *BinaryID) { b.Dev++ },
		"inode":  func(b *BinaryID) { b.Ino++ },
		"size":   func(b *BinaryID) { b.Size++ },
		"mtime":  func(b *BinaryID) { b.MtimeNs++ },
	} {
		t.Run(name, func(t *testing.T) {
			changed := id
			change(&changed)
			got, ok, err := c.Get(changed)
			require.NoError(t, err)
			assert.False(t, ok, "a binary whose %s changed must be asked again", name)
			assert.Nil(t, got)
		})
	}
	// A new answer for the changed binary replaces the old one.
	newer := id
	newer.MtimeNs++
	require.NoError(t, c.Put(newer, []string{"1.1.0"}))
	_, ok, err = c.Get(id)
	require.NoError(t, err)
	assert.False(t, ok)
	got, ok, err = c.Get(newer)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, []string{"1.1.0"}, got)

	require.NoError(t, c.Forget(id.Path))
	_, ok, err = c.Get(newer)
	require.NoError(t, err)
	assert.False(t, ok, "forgotten")
	require.NoError(t, c.Forget(id.Path), "forgetting nothing is fine")
}

// TestVersionCacheUntrustedEntries: an entry that is torn, too large or
// open to others is a miss with an error, never an answer.
func TestVersionCacheUntrustedEntries(t *testing.T) {
	id := sampleBinary()
	for name, tc := range map[string]struct {
		data string
		perm os.FileMode
	}{
		"torn":        {data: `{"binary":{"path":"/opt/cni/bin/portm`, perm: 0o600},
		"too large":   {data: `{"x":"` + string(make([]byte, maxVersionSize)) + `"}`, perm: 0o600},
		"world write": {data: `{"binary":{"path":"/opt/cni/bin/portmap"},"supportedVersions":["1.0.0"]}`, perm: 0o666},
	} {
		t.Run(name, func(t *testing.T) {
			fsys := afero.NewMemMapFs()
			c := NewVersionCache(fsys, "/cache")
			require.NoError(t, fsys.MkdirAll(c.dir, 0o700))
			require.NoError(t, afero.WriteFile(fsys, c.path(id.Path), []byte(tc.data), tc.perm))
			require.NoError(t, fsys.Chmod(c.path(id.Path), tc.perm))
			got, ok, err := c.Get(id)
			require.Error(t, err)
			assert.Contains(t, err.Error(), id.Path)
			assert.False(t, ok)
			assert.Nil(t, got)
		})
	}
}

// TestVersionCacheRealDisk: on the real disk the entry is a private file
// in a private dir, keyed by the binary's real device and inode.
func TestVersionCacheRealDisk(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "plugin")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o700))
	fi, err := os.Stat(bin)
	require.NoError(t, err)
	id := BinaryIDOf(bin, fi)
	assert.NotZero(t, id.Ino)
	c := NewVersionCache(afero.NewOsFs(), filepath.Join(dir, "cache"))
	require.NoError(t, c.Put(id, []string{"1.0.0"}))
	got, ok, err := c.Get(id)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, []string{"1.0.0"}, got)
	dfi, err := os.Stat(c.dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), dfi.Mode().Perm())
	entries, err := os.ReadDir(c.dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temp file left")

	// Rewritten in place (same inode): size and mtime change.
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o700))
	fi, err = os.Stat(bin)
	require.NoError(t, err)
	_, ok, err = c.Get(BinaryIDOf(bin, fi))
	require.NoError(t, err)
	assert.False(t, ok)
}
