package fileutil

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// FstatInfo and fstatatInfo (which never follows a symlink) return an
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
