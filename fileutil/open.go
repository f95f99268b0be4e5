package fileutil

import (
	"errors"
	"os"
	"syscall"

	"github.com/spf13/afero"
)

// Lstat stats name without following a final symlink where the filesystem
// can (afero.Lstater); filesystems without symlinks fall back to Stat.
func Lstat(fsys afero.Fs, name string) (os.FileInfo, error) {
	if l, ok := fsys.(afero.Lstater); ok {
		fi, _, err := l.LstatIfPossible(name)
		return fi, err
	}
	return fsys.Stat(name)
}

// OpenReadNoFollow opens name for reading. On the real filesystem it adds
// O_NOFOLLOW (a symlink swapped in after the lstat fails with ELOOP) and
// O_NONBLOCK (a FIFO swapped in does not block the open); afero.OsFs passes
// flags through to os.OpenFile. Other filesystems get plain O_RDONLY, as
// MemMapFs treats any other flag as a request for a writable handle.
func OpenReadNoFollow(fsys afero.Fs, name string) (afero.File, error) {
	if IsRealDisk(fsys) {
		return fsys.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	}
	return fsys.OpenFile(name, os.O_RDONLY, 0)
}

// IsSymlinkLoop reports whether err is the ELOOP of an O_NOFOLLOW open.
func IsSymlinkLoop(err error) bool {
	return errors.Is(err, syscall.ELOOP)
}
