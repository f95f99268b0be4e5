//go:build linux

package cache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/catena-cni/catena/fileutil"
)

// RetrierLockName is the cache dir's retrier lock, <cacheDir>/retrier.lock:
// whoever holds its flock runs the teardown retries of that cache dir
// outside the runtime's calls (catena's detached retrier, or catena-agent's
// reconcile loop, which holds it for as long as it runs). At most one
// retrier per cache dir at a time. Unlike an attachment's lock file it is
// never unlinked: it is one small file, and a holder that dies releases
// the flock with its last fd.
const RetrierLockName = "retrier.lock"

// RetrierLock is a held retrier lock.
type RetrierLock struct {
	f *os.File
}

// TryRetrierLock takes dir's retrier lock without waiting; it wraps
// ErrLocked if another process holds it. The cache dir is reached by the
// trusted walk (created 0700 if missing) and the lock file, created 0600,
// must be Catena's own; no symlink is followed.
func TryRetrierLock(dir string) (*RetrierLock, error) {
	dir = filepath.Clean(dir)
	path := filepath.Join(dir, RetrierLockName)
	dirfd, err := fileutil.WalkDir(dir, "", true)
	if err != nil {
		return nil, fmt.Errorf("retrier lock %s: %w", path, err)
	}
	defer func() { _ = unix.Close(dirfd) }()
	const flags = unix.O_RDWR | unix.O_CREAT | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK
	fd, err := fileutil.Openat(dirfd, RetrierLockName, flags, filePerm)
	if err != nil {
		return nil, fmt.Errorf("retrier lock: open %s: %w", path, err)
	}
	fi, err := fileutil.FstatInfo(fd, path)
	if err == nil {
		err = fileutil.CheckPrivateFile(path, fi)
	}
	if err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("retrier lock: %w", err)
	}
	if err := flockNB(fd); err != nil {
		_ = unix.Close(fd)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("retrier lock %s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("retrier lock: flock %s: %w", path, err)
	}
	return &RetrierLock{f: os.NewFile(uintptr(fd), path)}, nil
}

// InheritedRetrierLock wraps a retrier lock passed down by the process
// that took it (an fd it inherited): the flock belongs to the open file,
// which both processes share, so it stays held while either has it open.
// It checks that f is a regular file of Catena's own named RetrierLockName
// and that the flock is held on it (a LOCK_EX|LOCK_NB on the same open
// file succeeds only if it holds the lock or nobody does, and in the
// latter case this takes it).
func InheritedRetrierLock(f *os.File) (*RetrierLock, error) {
	if f == nil {
		return nil, errors.New("retrier lock: no inherited file")
	}
	if filepath.Base(f.Name()) != RetrierLockName {
		return nil, fmt.Errorf("retrier lock: inherited file %q is not %s", f.Name(), RetrierLockName)
	}
	fi, err := f.Stat()
	if err == nil {
		err = fileutil.CheckPrivateFile(f.Name(), fi)
	}
	if err != nil {
		return nil, fmt.Errorf("retrier lock: %w", err)
	}
	if err := flockNB(int(f.Fd())); err != nil {
		return nil, fmt.Errorf("retrier lock: inherited %s is not held: %w", f.Name(), err)
	}
	return &RetrierLock{f: f}, nil
}

// File is the open lock file, to hand to a child process (exec's
// ExtraFiles): the child then holds the lock too.
func (l *RetrierLock) File() *os.File { return l.f }

// Close releases this process's hold: the flock is dropped once no
// process has the open file any more.
func (l *RetrierLock) Close() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("retrier lock: close %s: %w", l.f.Name(), err)
	}
	return nil
}
