package fileutil

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testFilesystems are the filesystems the durable helpers must work on:
// the tests' in-memory one, the OS's, and a TrustedFs over the OS's rooted
// at root.
func testFilesystems(root string) map[string]afero.Fs {
	return map[string]afero.Fs{
		"memmapfs":  afero.NewMemMapFs(),
		"osfs":      afero.NewOsFs(),
		"trustedfs": TrustedFs(afero.NewOsFs(), root),
	}
}

func TestMkdirAllDurable(t *testing.T) {
	root := t.TempDir()
	for name, fsys := range testFilesystems(root) {
		t.Run(name, func(t *testing.T) {
			deep := filepath.Join(root, name, "a", "b", "c")
			require.NoError(t, MkdirAllDurable(fsys, deep, DirPerm))
			require.NoError(t, MkdirAllDurable(fsys, deep, DirPerm), "existing is fine")
			fi, err := fsys.Stat(deep)
			require.NoError(t, err)
			assert.True(t, fi.IsDir())

			p := filepath.Join(deep, "f")
			require.NoError(t, WriteFileDurable(fsys, p, []byte("one")))
			assert.ErrorContains(t, MkdirAllDurable(fsys, filepath.Join(p, "sub"), DirPerm), "not a directory", "a file is in the way")
		})
	}
}

// TestRemoveDurable: it reports whether there was an entry; a missing
// entry or parent is not an error.
func TestRemoveDurable(t *testing.T) {
	root := t.TempDir()
	for name, fsys := range testFilesystems(root) {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(root, name)
			require.NoError(t, MkdirAllDurable(fsys, dir, DirPerm))
			p := filepath.Join(dir, "f")
			require.NoError(t, WriteFileDurable(fsys, p, []byte("data")))
			tests := []struct {
				name    string
				path    string
				removed bool
			}{
				{"an existing file", p, true},
				{"the same, now missing", p, false},
				{"a missing parent", filepath.Join(dir, "nodir", "f"), false},
			}
			for _, tt := range tests {
				removed, err := RemoveDurable(fsys, tt.path)
				require.NoError(t, err, tt.name)
				assert.Equal(t, tt.removed, removed, tt.name)
			}
			_, err := fsys.Stat(p)
			assert.ErrorIs(t, err, os.ErrNotExist)
		})
	}
}

// TestRenameDurable: within a directory and across two.
func TestRenameDurable(t *testing.T) {
	root := t.TempDir()
	for name, fsys := range testFilesystems(root) {
		t.Run(name, func(t *testing.T) {
			a, b := filepath.Join(root, name, "a"), filepath.Join(root, name, "b")
			require.NoError(t, MkdirAllDurable(fsys, a, DirPerm))
			require.NoError(t, MkdirAllDurable(fsys, b, DirPerm))
			require.NoError(t, WriteFileDurable(fsys, filepath.Join(a, "f"), []byte("data")))
			require.NoError(t, RenameDurable(fsys, filepath.Join(a, "f"), filepath.Join(a, "g")))
			require.NoError(t, RenameDurable(fsys, filepath.Join(a, "g"), filepath.Join(b, "h")))
			data, err := afero.ReadFile(fsys, filepath.Join(b, "h"))
			require.NoError(t, err)
			assert.Equal(t, "data", string(data))
			err = RenameDurable(fsys, filepath.Join(a, "f"), filepath.Join(b, "x"))
			assert.ErrorIs(t, err, os.ErrNotExist)
			assert.ErrorContains(t, err, "rename "+filepath.Join(a, "f"))
		})
	}
}
