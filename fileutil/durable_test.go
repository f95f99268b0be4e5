package fileutil

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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

func TestDurableHelpers(t *testing.T) {
	for name, fs := range map[string]afero.Fs{"memmapfs": afero.NewMemMapFs(), "osfs": afero.NewOsFs()} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			deep := filepath.Join(dir, "a", "b", "c")
			require.NoError(t, MkdirAllDurable(fs, deep, 0o700))
			require.NoError(t, MkdirAllDurable(fs, deep, 0o700), "existing is fine")
			fi, err := fs.Stat(deep)
			require.NoError(t, err)
			assert.True(t, fi.IsDir())

			p := filepath.Join(deep, "f")
			require.NoError(t, WriteFileDurable(fs, p, []byte("one")))
			require.NoError(t, WriteFileDurable(fs, p, []byte("two")))
			data, err := afero.ReadFile(fs, p)
			require.NoError(t, err)
			assert.Equal(t, "two", string(data))
			assert.Error(t, MkdirAllDurable(fs, filepath.Join(p, "sub"), 0o700), "a file is in the way")

			require.NoError(t, RemoveDurable(fs, p))
			require.NoError(t, RemoveDurable(fs, p), "missing is fine")
			require.NoError(t, RemoveDurable(fs, filepath.Join(dir, "nodir", "f")), "missing parent is fine")
			_, err = fs.Stat(p)
			assert.ErrorIs(t, err, os.ErrNotExist)
		})
	}
}
