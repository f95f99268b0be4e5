package fileutil

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWriteFileAtomic: the content and exactly the mode asked, whatever
// the umask and the mode of the file replaced, and no temp file left, on
// every filesystem the writers use.
func TestWriteFileAtomic(t *testing.T) {
	old := syscall.Umask(0o077) // would leave a 0755 file 0700
	t.Cleanup(func() { syscall.Umask(old) })
	root := t.TempDir()
	for name, fsys := range testFilesystems(root) {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(root, name)
			require.NoError(t, MkdirAllDurable(fsys, dir, DirPerm))
			path := filepath.Join(dir, "00-catena.conflist")
			for _, tc := range []struct {
				data string
				perm os.FileMode
			}{
				{"one", 0o644},
				{"two", 0o600},
				{"a binary", 0o755},
				{"", 0o600},
				{"setuid asked", os.ModeSetuid | 0o700}, // only the permission bits are given
			} {
				require.NoError(t, WriteFileAtomic(fsys, path, []byte(tc.data), tc.perm))
				got, err := afero.ReadFile(fsys, path)
				require.NoError(t, err)
				assert.Equal(t, tc.data, string(got))
				fi, err := fsys.Stat(path)
				require.NoError(t, err)
				assert.Equal(t, tc.perm.Perm(), fi.Mode(), "%q: exactly the permission bits asked", tc.data)
				entries, err := afero.ReadDir(fsys, dir)
				require.NoError(t, err)
				assert.Len(t, entries, 1, "no temp file left")
			}
		})
	}
}

// TestWriteReaderAtomicShortSource: a source that yields fewer or more
// bytes than announced (a file that changed while it was copied) is an
// error, and the file replaced is left as it was, with no temp file.
func TestWriteReaderAtomicShortSource(t *testing.T) {
	tests := []struct {
		name string
		src  string
		size int64
	}{
		{"shorter", "abc", 5},
		{"longer", "abcdefg", 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "catena")
			fsys := afero.NewOsFs()
			require.NoError(t, WriteFileAtomic(fsys, path, []byte("old"), 0o755))
			err := WriteReaderAtomic(fsys, path, strings.NewReader(tt.src), tt.size, 0o755)
			require.ErrorContains(t, err, "the source changed meanwhile")
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, "old", string(got))
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Len(t, entries, 1, "no temp file left")
		})
	}
}

// TestWriteReaderAtomicCopiesWhole: a source larger than any copy buffer
// arrives whole.
func TestWriteReaderAtomicCopiesWhole(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	path := filepath.Join(t.TempDir(), "catena")
	require.NoError(t, WriteReaderAtomic(afero.NewOsFs(), path, bytes.NewReader(data), int64(len(data)), 0o755))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(data, got))
}

// TestTempName: a hidden name next to the path, unique per call, in the
// pattern the sweeps of leftover temp files know.
func TestTempName(t *testing.T) {
	pattern := regexp.MustCompile(`^\.00-catena\.conflist\.[0-9a-f]{16}\.tmp$`)
	a, err := TempName("/etc/cni/net.d/00-catena.conflist")
	require.NoError(t, err)
	b, err := TempName("/etc/cni/net.d/00-catena.conflist")
	require.NoError(t, err)
	assert.NotEqual(t, a, b)
	for _, p := range []string{a, b} {
		assert.Equal(t, "/etc/cni/net.d", filepath.Dir(p))
		assert.Regexp(t, pattern, filepath.Base(p))
	}
}
