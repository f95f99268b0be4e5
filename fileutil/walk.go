package fileutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// The openat walk: a directory under a root (Catena's cache dir, or its
// lock dir) is reached by opening the root with O_NOFOLLOW and then
// each component with openat(O_NOFOLLOW|O_DIRECTORY), fstat'ing every step
// and refusing (*UntrustedError) a step another user could write or that
// is a symlink. The caller then works with *at calls on the returned fd,
// so a directory swapped for a symlink at any point of the walk, or after
// it, is never followed: the fd is the directory that was checked.

const dirOpenFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// WalkDir opens rel (slash-separated, "" for root itself) under root and
// returns its fd, which the caller closes; every step, root included, is
// checked with CheckTrustedDir. With create, missing steps are made
// exactly 0700 (the parents of root with os.MkdirAll, as they are outside
// the trusted tree). A missing step is an error wrapping fs.ErrNotExist.
func WalkDir(root, rel string, create bool) (int, error) {
	fd, err := openDirStep(unix.AT_FDCWD, root, root, create)
	if errors.Is(err, fs.ErrNotExist) && create {
		if err := os.MkdirAll(filepath.Dir(root), DirPerm); err != nil {
			return -1, err
		}
		fd, err = openDirStep(unix.AT_FDCWD, root, root, create)
	}
	if err != nil {
		return -1, err
	}
	path := root
	for _, name := range splitRel(rel) {
		path = filepath.Join(path, name)
		next, err := openDirStep(fd, name, path, create)
		_ = unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// splitRel splits a relative slash path into its components.
func splitRel(rel string) []string {
	if rel == "" || rel == "." {
		return nil
	}
	return strings.Split(rel, "/")
}

// openDirStep opens name in dirfd as a directory without following a
// symlink, creating it (exactly 0700) if asked, and checks it.
func openDirStep(dirfd int, name, path string, create bool) (int, error) {
	fd, err := Openat(dirfd, name, dirOpenFlags, 0)
	if errors.Is(err, unix.ENOENT) && create {
		made := mkdirat(dirfd, name, DirPerm)
		if made != nil && !errors.Is(made, unix.EEXIST) {
			return -1, &fs.PathError{Op: "mkdir", Path: path, Err: made}
		}
		fd, err = Openat(dirfd, name, dirOpenFlags, 0)
		if err == nil && made == nil {
			// The umask may have taken bits: a dir Catena creates is
			// exactly 0700.
			if err := unix.Fchmod(fd, DirPerm); err != nil {
				_ = unix.Close(fd)
				return -1, &fs.PathError{Op: "chmod", Path: path, Err: err}
			}
		}
	}
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return -1, describeNonDir(dirfd, name, path, err)
		}
		return -1, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	fi, err := FstatInfo(fd, filepath.Base(path))
	if err == nil {
		err = CheckTrustedDir(path, fi)
	}
	if err != nil {
		_ = unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// describeNonDir turns the ELOOP or ENOTDIR of a directory open into the
// *UntrustedError naming what is there instead.
func describeNonDir(dirfd int, name, path string, cause error) error {
	fi, err := fstatatInfo(dirfd, name)
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: cause}
	}
	if err := CheckTrustedDir(path, fi); err != nil {
		return err
	}
	return &fs.PathError{Op: "open", Path: path, Err: cause}
}

// Openat is openat(2) retried on EINTR; so is mkdirat.
func Openat(dirfd int, name string, flags int, perm uint32) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, perm)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

func mkdirat(dirfd int, name string, perm uint32) error {
	for {
		err := unix.Mkdirat(dirfd, name, perm)
		if err != unix.EINTR {
			return err
		}
	}
}
