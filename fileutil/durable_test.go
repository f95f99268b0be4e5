package fileutil

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWriteFileDurableCleansUpOnError: a failed replace names the path and
// leaves no temp file.
func TestWriteFileDurableCleansUpOnError(t *testing.T) {
	fs := afero.NewOsFs()
	dir := t.TempDir()
	path := filepath.Join(dir, "rec.json")
	// A non-empty directory at the destination makes the rename fail.
	require.NoError(t, os.MkdirAll(filepath.Join(path, "x"), 0o700))
	err := WriteFileDurable(fs, path, []byte("data"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), path)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "the temp file is removed")

	err = WriteFileDurable(fs, filepath.Join(dir, "missing", "rec.json"), []byte("data"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing")
}

// TestWriteFileDurableReplacesLeftoverTemp: the temp file a crash left at
// the fixed temp name, or a symlink planted there, is unlinked and the
// write goes through; the link's target is never written.
func TestWriteFileDurableReplacesLeftoverTemp(t *testing.T) {
	tests := []struct {
		name  string
		plant func(t *testing.T, tmp, victim string)
	}{
		{"a leftover temp file", func(t *testing.T, tmp, _ string) {
			require.NoError(t, os.WriteFile(tmp, []byte("torn"), 0o600))
		}},
		{"a symlink at the temp name", func(t *testing.T, tmp, victim string) {
			require.NoError(t, os.Symlink(victim, tmp))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path, victim := filepath.Join(dir, "rec.json"), filepath.Join(t.TempDir(), "victim")
			require.NoError(t, os.WriteFile(victim, []byte("victim"), 0o600))
			tt.plant(t, TempPath(path), victim)
			require.NoError(t, WriteFileDurable(afero.NewOsFs(), path, []byte("new")))
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, "new", string(got))
			got, err = os.ReadFile(victim)
			require.NoError(t, err)
			assert.Equal(t, "victim", string(got), "the link's target is untouched")
			_, err = os.Lstat(TempPath(path))
			assert.ErrorIs(t, err, os.ErrNotExist, "no temp file left")
		})
	}
}

// TestWriteFileDurableInfo: the info returned is the new file's, as an
// lstat after the write sees it.
func TestWriteFileDurableInfo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rec.json")
	fi, err := WriteFileDurableInfo(afero.NewOsFs(), path, []byte("12345"))
	require.NoError(t, err)
	after, err := os.Lstat(path)
	require.NoError(t, err)
	assert.True(t, os.SameFile(fi, after))
	assert.Equal(t, int64(5), fi.Size())
}
