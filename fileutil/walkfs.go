package fileutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/afero"
	"golang.org/x/sys/unix"
)

// walkFs is the real disk as a trusted tree's users see it: an afero.Fs
// rooted at the tree's root (the cache dir, the libcni results dir) in
// which every operation reaches its entry by the openat walk (walk.go) and
// acts on it with an *at call that never follows a symlink. So its users
// keep one code path on afero: on afero.MemMapFs and the fault-injecting
// filesystems of the tests (no owners, no symlinks) their own lstat checks
// apply, and on the real disk this type adds the owner and mode checks of
// every directory on the way and refuses every symlink.
//
// Every directory walkFs opens, as a step or as the entry itself, must be
// trusted (CheckTrustedDir); regular files are the caller's to check (the
// store refuses a record owned by another uid). Paths outside the root are
// passed to the OS unchanged: only MkdirAllDurable reaches them, to create
// the root's parents. Stat never follows a symlink (it is Lstat), and
// RemoveAll, Chmod, Chown and Chtimes are not supported.
type walkFs struct {
	root string
}

var (
	_ afero.Fs      = (*walkFs)(nil)
	_ afero.Lstater = (*walkFs)(nil)
)

// TrustedFs returns the filesystem through which Catena reads and writes
// under root: on the real disk (an *afero.OsFs) one that walks every path
// with openat, checks the owner and mode of every directory and never
// follows a symlink; any other filesystem (tests') unchanged. A TrustedFs
// of the same root is returned as it is, and one of another root gives
// the TrustedFs of root, so that a process builds one for a tree and
// hands it to every user of the tree, whose constructors may call
// TrustedFs again.
func TrustedFs(fsys afero.Fs, root string) afero.Fs {
	root = filepath.Clean(root)
	switch f := fsys.(type) {
	case *walkFs:
		if f.root == root {
			return f
		}
		return &walkFs{root: root}
	case *afero.OsFs:
		return &walkFs{root: root}
	}
	return fsys
}

// IsRealDisk reports whether fsys passes open flags to the kernel: the OS
// filesystem, or a TrustedFs over it.
func IsRealDisk(fsys afero.Fs) bool {
	switch fsys.(type) {
	case *afero.OsFs, *walkFs:
		return true
	}
	return false
}

// where splits name into the directory (relative to the root) to walk and
// the entry in it. inside is false for a path outside the root, and leaf
// is "" for the root itself.
func (w *walkFs) where(name string) (dir, leaf string, inside bool) {
	name = filepath.Clean(name)
	if name == w.root {
		return "", "", true
	}
	rel, ok := strings.CutPrefix(name, w.root+string(filepath.Separator))
	if !ok {
		return "", "", false
	}
	dir, leaf = filepath.Split(rel)
	return strings.TrimSuffix(dir, "/"), leaf, true
}

// at walks to name's directory and calls fn with its fd and the entry.
func (w *walkFs) at(name string, fn func(dirfd int, leaf string) error) error {
	dir, leaf, _ := w.where(name)
	fd, err := WalkDir(w.root, dir, false)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(fd) }()
	return fn(fd, leaf)
}

func pathErr(op, path string, err error) error {
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: path, Err: err}
}

// Name implements afero.Fs.
func (w *walkFs) Name() string { return "catena-openat" }

// Create implements afero.Fs.
func (w *walkFs) Create(name string) (afero.File, error) {
	return w.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, FilePerm)
}

// Open implements afero.Fs.
func (w *walkFs) Open(name string) (afero.File, error) {
	return w.OpenFile(name, os.O_RDONLY, 0)
}

// OpenFile implements afero.Fs: O_NOFOLLOW, O_CLOEXEC and O_NONBLOCK are
// always added (a FIFO planted at the name must not block the open; on a
// regular file or directory O_NONBLOCK changes nothing);
// a file it creates (O_CREATE|O_EXCL) gets exactly perm; a directory it
// opens must be trusted.
func (w *walkFs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	dir, leaf, inside := w.where(name)
	if !inside {
		return os.OpenFile(name, flag, perm)
	}
	if leaf == "" {
		fd, err := WalkDir(w.root, "", false)
		if err != nil {
			return nil, err
		}
		return os.NewFile(uintptr(fd), name), nil
	}
	fd, err := WalkDir(w.root, dir, false)
	if err != nil {
		return nil, err
	}
	defer func() { _ = unix.Close(fd) }()
	f, err := Openat(fd, leaf, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, uint32(perm.Perm()))
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	if flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL {
		if err := unix.Fchmod(f, uint32(perm.Perm())); err != nil {
			_ = unix.Close(f)
			return nil, pathErr("chmod", name, err)
		}
	}
	fi, err := FstatInfo(f, leaf)
	if err == nil && fi.IsDir() {
		err = CheckTrustedDir(name, fi)
	}
	if err != nil {
		_ = unix.Close(f)
		return nil, err
	}
	return os.NewFile(uintptr(f), name), nil
}

// Mkdir implements afero.Fs; the directory gets exactly perm.
func (w *walkFs) Mkdir(name string, perm os.FileMode) error {
	_, leaf, inside := w.where(name)
	if !inside {
		return os.Mkdir(name, perm)
	}
	if leaf == "" {
		if err := os.Mkdir(name, perm); err != nil {
			return err
		}
		return os.Chmod(name, perm)
	}
	return w.at(name, func(dirfd int, leaf string) error {
		if err := mkdirat(dirfd, leaf, uint32(perm.Perm())); err != nil {
			return pathErr("mkdir", name, err)
		}
		fd, err := Openat(dirfd, leaf, dirOpenFlags, 0)
		if err != nil {
			return pathErr("open", name, err)
		}
		defer func() { _ = unix.Close(fd) }()
		return pathErr("chmod", name, unix.Fchmod(fd, uint32(perm.Perm())))
	})
}

// MkdirAll implements afero.Fs: missing directories are made 0700.
func (w *walkFs) MkdirAll(name string, perm os.FileMode) error {
	_, _, inside := w.where(name)
	if !inside {
		return os.MkdirAll(name, perm)
	}
	rel := ""
	if r, err := filepath.Rel(w.root, filepath.Clean(name)); err == nil && r != "." {
		rel = r
	}
	fd, err := WalkDir(w.root, rel, true)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// Remove implements afero.Fs: an entry (a symlink itself, or an empty
// directory) is unlinked from its checked directory.
func (w *walkFs) Remove(name string) error {
	if _, leaf, inside := w.where(name); !inside || leaf == "" {
		return pathErr("remove", name, errors.ErrUnsupported)
	}
	return w.at(name, func(dirfd int, leaf string) error {
		err := unix.Unlinkat(dirfd, leaf, 0)
		if err == unix.EISDIR {
			err = unix.Unlinkat(dirfd, leaf, unix.AT_REMOVEDIR)
		}
		return pathErr("remove", name, err)
	})
}

// RemoveAll is not supported: no user of a trusted tree removes a subtree.
func (w *walkFs) RemoveAll(name string) error {
	return pathErr("removeall", name, errors.ErrUnsupported)
}

// Rename implements afero.Fs with renameat between two checked
// directories; the entry itself is moved, a symlink is not followed.
func (w *walkFs) Rename(oldname, newname string) error {
	_, oleaf, oin := w.where(oldname)
	_, nleaf, nin := w.where(newname)
	if !oin || !nin || oleaf == "" || nleaf == "" {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: errors.ErrUnsupported}
	}
	return w.at(oldname, func(ofd int, oleaf string) error {
		return w.at(newname, func(nfd int, nleaf string) error {
			if err := unix.Renameat(ofd, oleaf, nfd, nleaf); err != nil {
				return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
			}
			return nil
		})
	})
}

// Stat implements afero.Fs. It never follows a symlink.
func (w *walkFs) Stat(name string) (os.FileInfo, error) {
	fi, _, err := w.LstatIfPossible(name)
	return fi, err
}

// LstatIfPossible implements afero.Lstater.
func (w *walkFs) LstatIfPossible(name string) (os.FileInfo, bool, error) {
	_, leaf, inside := w.where(name)
	if !inside {
		fi, err := os.Lstat(name)
		return fi, true, err
	}
	if leaf == "" {
		fi, err := fstatatInfo(unix.AT_FDCWD, name)
		return fi, true, pathErrOf(err, name)
	}
	var fi os.FileInfo
	err := w.at(name, func(dirfd int, leaf string) error {
		var err error
		fi, err = fstatatInfo(dirfd, leaf)
		return pathErrOf(err, name)
	})
	return fi, true, err
}

// pathErrOf names the full path in a *fs.PathError.
func pathErrOf(err error, name string) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: pe.Op, Path: name, Err: pe.Err}
	}
	return err
}

// Chmod is not supported.
func (w *walkFs) Chmod(name string, _ os.FileMode) error {
	return pathErr("chmod", name, errors.ErrUnsupported)
}

// Chown is not supported.
func (w *walkFs) Chown(name string, _, _ int) error {
	return pathErr("chown", name, errors.ErrUnsupported)
}

// Chtimes is not supported.
func (w *walkFs) Chtimes(name string, _, _ time.Time) error {
	return pathErr("chtimes", name, errors.ErrUnsupported)
}
