package fileutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The openat walk: a directory under a root (the cache dir, or the
// FlockLocker's dir) is reached by opening the root with O_NOFOLLOW and then
// each component with openat(O_NOFOLLOW|O_DIRECTORY), fstat'ing every step
// and refusing (*UntrustedError) a step another user could write or that
// is a symlink. The caller then works with *at calls on the returned fd,
// so a directory swapped for a symlink at any point of the walk, or after
// it, is never followed: the fd is the directory that was checked.

const dirOpenFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// walkDir opens rel (slash-separated, "" for root itself) under root and
// returns its fd; every step, root included, is checked with
// checkTrustedDir. With create, missing steps are made 0700 (the parents
// of root with os.MkdirAll, as they are outside the cache dir). A missing
// step is an error wrapping fs.ErrNotExist.
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

// openat, mkdirat: retried on EINTR.
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

// fstatInfo and fstatatInfo (which never follows a symlink) return an
// os.FileInfo whose Sys() is a *syscall.Stat_t, as os.Lstat's is.
func FstatInfo(fd int, name string) (os.FileInfo, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "fstat", Path: name, Err: err}
	}
	return newStatInfo(name, &st), nil
}

func fstatatInfo(dirfd int, name string) (os.FileInfo, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: name, Err: err}
	}
	return newStatInfo(filepath.Base(name), &st), nil
}

// statInfo is an os.FileInfo from a unix.Stat_t.
type statInfo struct {
	name string
	sys  syscall.Stat_t
}

var _ os.FileInfo = (*statInfo)(nil)

func newStatInfo(name string, st *unix.Stat_t) *statInfo {
	return &statInfo{name: name, sys: syscall.Stat_t{
		Dev: st.Dev, Ino: st.Ino, Mode: st.Mode, Uid: st.Uid, Gid: st.Gid, Size: st.Size,
		Mtim: syscall.Timespec{Sec: st.Mtim.Sec, Nsec: st.Mtim.Nsec},
		Ctim: syscall.Timespec{Sec: st.Ctim.Sec, Nsec: st.Ctim.Nsec},
	}}
}

func (s *statInfo) Name() string       { return s.name }
func (s *statInfo) Size() int64        { return s.sys.Size }
func (s *statInfo) ModTime() time.Time { return time.Unix(s.sys.Mtim.Sec, s.sys.Mtim.Nsec) }
func (s *statInfo) IsDir() bool        { return s.Mode().IsDir() }
func (s *statInfo) Sys() any           { return &s.sys }

// Mode converts st_mode as os does.
func (s *statInfo) Mode() fs.FileMode {
	m := fs.FileMode(s.sys.Mode & 0o777)
	switch s.sys.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	}
	if s.sys.Mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if s.sys.Mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if s.sys.Mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}
