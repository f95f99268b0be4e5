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

// TestMarksRoundTrip: put, list, replace and clear, on the real disk, with
// private modes.
func TestMarksRoundTrip(t *testing.T) {
	dir := t.TempDir()
	m := NewDiskMarks(afero.NewOsFs(), dir)
	got, err := m.Marks()
	require.NoError(t, err)
	assert.Empty(t, got)

	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	mk := Mark{Key: testKey("c1"), MarkedAt: at, Version: "v1"}
	require.NoError(t, m.PutMark(mk))
	require.NoError(t, m.PutMark(Mark{Key: testKey("c2"), MarkedAt: at, Version: "v1"}))
	mk.Version = "v2"
	require.NoError(t, m.PutMark(mk))
	got, err = m.Marks()
	require.NoError(t, err)
	assert.Equal(t, map[Key]Mark{testKey("c1"): mk, testKey("c2"): {Key: testKey("c2"), MarkedAt: at, Version: "v1"}}, got)

	path := filepath.Join(dir, "reconcile", "podnet", "c1:eth0.json")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	fi, err = os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	require.NoError(t, m.ClearMark(testKey("c1")))
	require.NoError(t, m.ClearMark(testKey("c1")), "clearing twice")
	got, err = m.Marks()
	require.NoError(t, err)
	assert.Len(t, got, 1)
	assert.Error(t, m.PutMark(Mark{Key: Key{Network: "../x", ContainerID: "c", IfName: "eth0"}}))
}

// TestMarksUntrusted: a mark that is a symlink, open to others, not JSON
// or naming another attachment is never believed and is removed; a
// symlinked reconcile dir is refused.
func TestMarksUntrusted(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, path string)
	}{
		{"symlink", func(t *testing.T, path string) {
			target := filepath.Join(t.TempDir(), "elsewhere.json")
			require.NoError(t, os.WriteFile(target, []byte(`{"key":{"network":"podnet","containerID":"c1","ifName":"eth0"},"version":"v"}`), 0o600))
			require.NoError(t, os.Symlink(target, path))
		}},
		{"group writable", func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path, []byte(`{"key":{"network":"podnet","containerID":"c1","ifName":"eth0"},"version":"v"}`), 0o600))
			require.NoError(t, os.Chmod(path, 0o620))
		}},
		{"junk", func(t *testing.T, path string) { require.NoError(t, os.WriteFile(path, []byte("{torn"), 0o600)) }},
		{"names another attachment", func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path, []byte(`{"key":{"network":"podnet","containerID":"c9","ifName":"eth0"},"version":"v"}`), 0o600))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			m := NewDiskMarks(afero.NewOsFs(), dir)
			require.NoError(t, m.PutMark(Mark{Key: testKey("c0"), Version: "v"}))
			path := filepath.Join(dir, "reconcile", "podnet", "c1:eth0.json")
			tc.plant(t, path)
			got, err := m.Marks()
			require.NoError(t, err)
			assert.Equal(t, []Key{testKey("c0")}, keysOf(got))
			_, err = os.Lstat(path)
			assert.ErrorIs(t, err, os.ErrNotExist, "removed")
		})
	}
	t.Run("symlinked dir", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.Symlink(t.TempDir(), filepath.Join(dir, "reconcile")))
		m := NewDiskMarks(afero.NewOsFs(), dir)
		assert.ErrorContains(t, m.PutMark(Mark{Key: testKey("c0")}), "symlink")
		_, err := m.Marks()
		assert.ErrorContains(t, err, "symlink")
	})
}

func keysOf(m map[Key]Mark) []Key {
	var out []Key
	for k := range m {
		out = append(out, k)
	}
	return out
}
