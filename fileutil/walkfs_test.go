//go:build linux

package fileutil

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTrustedFsOfTrustedFs: a process builds one TrustedFs of a tree and
// hands it to the tree's users, whose constructors call TrustedFs again:
// the same root gives the same filesystem back, another root a TrustedFs
// of that root, and a filesystem of the tests is left as it is.
func TestTrustedFsOfTrustedFs(t *testing.T) {
	root := t.TempDir()
	trusted := TrustedFs(afero.NewOsFs(), root)
	require.IsType(t, &walkFs{}, trusted)

	assert.Same(t, trusted, TrustedFs(trusted, root))
	assert.Same(t, trusted, TrustedFs(trusted, root+"/"), "the root is compared clean")

	other := TrustedFs(trusted, filepath.Join(root, "sub"))
	require.IsType(t, &walkFs{}, other)
	assert.Equal(t, filepath.Join(root, "sub"), other.(*walkFs).root)

	mem := afero.NewMemMapFs()
	assert.Same(t, mem, TrustedFs(mem, root))
	assert.True(t, IsRealDisk(trusted))
	assert.False(t, IsRealDisk(mem))
}

// TestTrustedFsRefuses: through a TrustedFs, a directory another user
// could write or a symlink where a directory must be is refused, naming
// it, whichever operation walks through it; a final symlink is never
// followed and a FIFO never blocks an open.
func TestTrustedFsRefuses(t *testing.T) {
	tests := []struct {
		name  string
		plant func(t *testing.T, root string) string // the entry to be named
		path  string                                 // what the operations reach, under root
		why   string
	}{
		{"a step writable by others", func(t *testing.T, root string) string {
			p := filepath.Join(root, "records")
			require.NoError(t, os.Chmod(p, 0o777))
			return p
		}, "records/podnet/rec.json", "is writable by group or others"},
		{"a step that is a symlink", func(t *testing.T, root string) string {
			p := filepath.Join(root, "records", "podnet")
			outside := t.TempDir()
			require.NoError(t, os.CopyFS(outside, os.DirFS(p)))
			require.NoError(t, os.RemoveAll(p))
			require.NoError(t, os.Symlink(outside, p))
			return p
		}, "records/podnet/rec.json", "is a symlink where a directory must be"},
		{"the root writable by group", func(t *testing.T, root string) string {
			require.NoError(t, os.Chmod(root, 0o770))
			return root
		}, "records/podnet/rec.json", "is writable by group or others"},
	}
	ops := map[string]func(fsys afero.Fs, p string) error{
		"open":  func(fsys afero.Fs, p string) error { f, err := fsys.Open(p); closeIf(f); return err },
		"lstat": func(fsys afero.Fs, p string) error { _, err := Lstat(fsys, p); return err },
		"create": func(fsys afero.Fs, p string) error {
			f, err := fsys.OpenFile(p+".new", os.O_CREATE|os.O_EXCL|os.O_WRONLY, FilePerm)
			closeIf(f)
			return err
		},
		"remove": func(fsys afero.Fs, p string) error { return fsys.Remove(p) },
		"rename": func(fsys afero.Fs, p string) error { return fsys.Rename(p, p+".moved") },
		"mkdir -p": func(fsys afero.Fs, p string) error {
			return fsys.MkdirAll(filepath.Join(filepath.Dir(p), "sub"), DirPerm)
		},
		"write":      func(fsys afero.Fs, p string) error { return WriteFileAtomic(fsys, p, []byte("x"), FilePerm) },
		"read small": func(fsys afero.Fs, p string) error { _, err := ReadSmallFile(fsys, p, 64, true); return err },
	}
	for _, tt := range tests {
		for opName, op := range ops {
			t.Run(tt.name+"/"+opName, func(t *testing.T) {
				root := newTree(t)
				named := tt.plant(t, root)
				err := op(TrustedFs(afero.NewOsFs(), root), filepath.Join(root, tt.path))
				var ue *UntrustedError
				require.True(t, errors.As(err, &ue), "want an *UntrustedError, got %v", err)
				assert.Equal(t, named, ue.Path)
				assert.Contains(t, ue.Why, tt.why)
			})
		}
	}

	t.Run("a final symlink", func(t *testing.T) {
		root := newTree(t)
		p := filepath.Join(root, "records", "podnet", "link.json")
		require.NoError(t, os.Symlink(filepath.Join(root, "records", "podnet", "rec.json"), p))
		_, err := TrustedFs(afero.NewOsFs(), root).Open(p)
		assert.ErrorIs(t, err, syscall.ELOOP)
		fi, err := Lstat(TrustedFs(afero.NewOsFs(), root), p)
		require.NoError(t, err)
		assert.NotZero(t, fi.Mode()&os.ModeSymlink, "an lstat sees the link itself")
	})

	t.Run("a FIFO", func(t *testing.T) {
		root := newTree(t)
		p := filepath.Join(root, "records", "podnet", "fifo.json")
		require.NoError(t, syscall.Mkfifo(p, 0o600))
		done := make(chan error, 1)
		go func() {
			f, err := TrustedFs(afero.NewOsFs(), root).Open(p)
			closeIf(f)
			done <- err
		}()
		select {
		case err := <-done:
			require.NoError(t, err, "opened without a writer, and without blocking")
		case <-time.After(5 * time.Second):
			t.Fatal("the open of a FIFO blocked")
		}
	})
}

// TestTrustedFsCreatesExactModes: what a TrustedFs creates gets exactly the
// mode asked, whatever the umask.
func TestTrustedFsCreatesExactModes(t *testing.T) {
	old := syscall.Umask(0o277) // would leave a dir 0500 and a file 0400
	t.Cleanup(func() { syscall.Umask(old) })
	root := filepath.Join(t.TempDir(), "catena")
	fsys := TrustedFs(afero.NewOsFs(), root)
	deep := filepath.Join(root, "a", "b")
	require.NoError(t, fsys.MkdirAll(deep, DirPerm))
	require.NoError(t, fsys.Mkdir(filepath.Join(deep, "c"), 0o750))
	f, err := fsys.OpenFile(filepath.Join(deep, "f"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	for p, want := range map[string]os.FileMode{
		root:                     os.ModeDir | DirPerm,
		filepath.Join(root, "a"): os.ModeDir | DirPerm,
		deep:                     os.ModeDir | DirPerm,
		filepath.Join(deep, "c"): os.ModeDir | 0o750,
		filepath.Join(deep, "f"): 0o640,
	} {
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		assert.Equal(t, want, fi.Mode(), p)
	}
}

// newTree makes a trusted tree with a record, records/podnet/rec.json.
func newTree(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "catena")
	fsys := TrustedFs(afero.NewOsFs(), root)
	require.NoError(t, MkdirAllDurable(fsys, filepath.Join(root, "records", "podnet"), DirPerm))
	require.NoError(t, WriteFileDurable(fsys, filepath.Join(root, "records", "podnet", "rec.json"), []byte("{}")))
	return root
}

func closeIf(f afero.File) {
	if f != nil {
		_ = f.Close()
	}
}

// TestTrustedFsLstatKeepsFileIdentity: an lstat through TrustedFs carries
// what os.Lstat's does to identify a version of a file (inode, size,
// mtime, ctime), so that a file read through it can be compared with
// itself later (package libchain/libcnientry removes a libcni entry only if
// unchanged).
func TestTrustedFsLstatKeepsFileIdentity(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "entry")
	require.NoError(t, os.WriteFile(path, []byte("x"), 0o600))
	want, err := os.Lstat(path)
	require.NoError(t, err)
	fsys := TrustedFs(afero.NewOsFs(), dir)
	got, _, err := fsys.(afero.Lstater).LstatIfPossible(path)
	require.NoError(t, err)
	w, g := want.Sys().(*syscall.Stat_t), got.Sys().(*syscall.Stat_t)
	assert.Equal(t, w.Ino, g.Ino)
	assert.Equal(t, w.Size, g.Size)
	assert.Equal(t, w.Mtim, g.Mtim)
	assert.Equal(t, w.Ctim, g.Ctim)
	assert.NotZero(t, g.Ctim.Nano())
}
