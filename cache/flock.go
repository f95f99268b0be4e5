//go:build linux

package cache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/catena-cni/catena/fileutil"
)

// FlockLocker locks attachments with flock(2) on one file per attachment:
//
//	<Dir>/<network>/<containerID>:<ifname>.lock
//
// (names.go for long keys). Dir's parent (the cache dir), Dir and
// Dir/<network> are reached by the openat walk (fileutil.WalkDir) and must be owned
// by Catena's user and not writable by others, as must the lock file; no
// symlink is followed. The
// file holds the holder and the full key, for waiters' messages.
//
// The kernel drops a flock when its file is closed, so a holder that dies
// releases its lock at once; there is no stale-PID check and none is needed.
//
// Lock files do not pile up: the holder unlinks its file on Unlock. Done
// naively that opens the classic race (B opens the file, A unlinks it and
// releases, B locks the now nameless inode while C creates a new file at the
// same path and locks that: both B and C think they hold the lock). The
// scheme that closes it:
//
//   - Unlock unlinks the path while still holding the flock, then closes.
//   - After flock succeeds, the acquirer fstats its fd and lstats the path.
//     If the path is missing or names another inode, the file was unlinked
//     by a previous holder: it closes and starts over with a fresh open.
//
// Hence a verified holder's inode is always the one at the path, and only a
// verified holder ever unlinks the path, so two holders can never both be
// verified at once.
type FlockLocker struct {
	Dir string
}

var _ Locker = (*FlockLocker)(nil)

// NewFlockLocker returns a locker keeping its lock files under dir, which is
// created (0700) on first use.
func NewFlockLocker(dir string) *FlockLocker {
	return &FlockLocker{Dir: filepath.Clean(dir)}
}

const (
	lockExt        = ".lock"
	lockBackoffMin = time.Millisecond
	lockBackoffMax = 25 * time.Millisecond
)

// LocksDir is the conventional subdirectory of a cache dir that holds the
// FlockLocker's files.
const LocksDir = "locks"

// Path returns the lock file of key, for operators' tools that inspect
// locks (catenactl doctor); it does not look at the filesystem.
func (l *FlockLocker) Path(key Key) string {
	return l.lockPath(key)
}

func (l *FlockLocker) lockPath(key Key) string {
	return filepath.Join(l.Dir, networkDirName(key.Network), keyName(key)+lockExt)
}

// Lock waits for key's lock, polling with a short backoff, until ctx is done;
// it then returns a *LockedError naming the holder.
func (l *FlockLocker) Lock(ctx context.Context, key Key, who Holder) (Unlocker, error) {
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("lock attachment: %w", err)
	}
	start := time.Now()
	backoff := lockBackoffMin
	for {
		u, err := l.tryLock(key, who)
		if !errors.Is(err, ErrLocked) {
			return u, err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, &LockedError{Key: key, Holder: l.readHolder(key), Waited: time.Since(start)}
		case <-t.C:
		}
		backoff = min(2*backoff, lockBackoffMax)
	}
}

// TryLock makes one non-blocking attempt. On failure the error is a
// *LockedError (wrapping ErrLocked) naming the holder.
func (l *FlockLocker) TryLock(key Key, who Holder) (Unlocker, error) {
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("lock attachment: %w", err)
	}
	u, err := l.tryLock(key, who)
	if errors.Is(err, ErrLocked) {
		return nil, &LockedError{Key: key, Holder: l.readHolder(key)}
	}
	return u, err
}

// lockFile is an attachment's lock file: the fd of its checked directory,
// and its name there.
type lockFile struct {
	dirfd int
	dir   string
	name  string
}

// lockFileOf walks to key's lock dir, creating it (0700) on first use. No
// fsync: a lock file is not state. The caller closes it.
func (l *FlockLocker) lockFileOf(key Key) (*lockFile, error) {
	dir := networkDirName(key.Network)
	fd, err := fileutil.WalkDir(filepath.Dir(l.Dir), filepath.Base(l.Dir)+"/"+dir, true)
	if err != nil {
		return nil, err
	}
	return &lockFile{dirfd: fd, dir: filepath.Join(l.Dir, dir), name: keyName(key) + lockExt}, nil
}

func (f *lockFile) path() string { return filepath.Join(f.dir, f.name) }

func (f *lockFile) close() { _ = unix.Close(f.dirfd) }

// tryLock makes one attempt; it returns ErrLocked if another holder has the
// lock. A file found unlinked after locking it is not an attempt: it is
// dropped and the path opened anew.
func (l *FlockLocker) tryLock(key Key, who Holder) (Unlocker, error) {
	lf, err := l.lockFileOf(key)
	if err != nil {
		return nil, fmt.Errorf("lock attachment %s: %w", key, err)
	}
	for {
		fd, err := lf.open()
		if err != nil {
			lf.close()
			return nil, fmt.Errorf("lock attachment %s: %w", key, err)
		}
		if err := flockNB(fd); err != nil {
			_ = unix.Close(fd)
			lf.close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, ErrLocked
			}
			return nil, fmt.Errorf("lock attachment %s: flock %s: %w", key, lf.path(), err)
		}
		current, err := lf.isCurrent(fd)
		if err != nil {
			_ = unix.Close(fd)
			lf.close()
			return nil, fmt.Errorf("lock attachment %s: %s: %w", key, lf.path(), err)
		}
		if !current {
			_ = unix.Close(fd) // unlinked by the previous holder: retry
			continue
		}
		writeHolder(fd, fillHolder(who), key)
		return &flockUnlocker{fd: fd, file: lf, key: key}, nil
	}
}

// open opens (creating if needed) the lock file, never through a symlink,
// and refuses one that another user owns or could write.
func (f *lockFile) open() (int, error) {
	const flags = unix.O_RDWR | unix.O_CREAT | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := fileutil.Openat(f.dirfd, f.name, flags, filePerm)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", f.path(), err)
	}
	fi, err := fileutil.FstatInfo(fd, f.name)
	if err == nil {
		err = fileutil.CheckPrivateFile(f.path(), fi)
	}
	if err != nil {
		_ = unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// flockNB takes the flock without blocking; EWOULDBLOCK means held.
func flockNB(fd int) error {
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EINTR {
			return err
		}
	}
}

// isCurrent reports whether the locked fd is still the lock file: false
// if the name is missing or names another inode.
func (f *lockFile) isCurrent(fd int) (bool, error) {
	var fdSt, pathSt unix.Stat_t
	if err := unix.Fstat(fd, &fdSt); err != nil {
		return false, fmt.Errorf("fstat: %w", err)
	}
	if err := unix.Fstatat(f.dirfd, f.name, &pathSt, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return false, nil
		}
		return false, fmt.Errorf("lstat: %w", err)
	}
	return fdSt.Dev == pathSt.Dev && fdSt.Ino == pathSt.Ino, nil
}

// lockContent is what a lock file holds: the holder, and the full key
// (the file name may be hashed).
type lockContent struct {
	Holder
	Key Key `json:"key"`
}

// writeHolder records who holds the lock, for waiters' messages. It is best
// effort: the lock is held whether or not this succeeds.
func writeHolder(fd int, who Holder, key Key) {
	data, err := json.Marshal(lockContent{Holder: who, Key: key})
	if err != nil {
		return
	}
	if unix.Ftruncate(fd, 0) != nil {
		return
	}
	for off := 0; off < len(data); {
		n, err := unix.Pwrite(fd, data[off:], int64(off))
		if err != nil || n <= 0 {
			return
		}
		off += n
	}
}

// readHolder reads the holder of key's lock; nil if it cannot. It creates
// nothing.
func (l *FlockLocker) readHolder(key Key) *Holder {
	dirfd, err := fileutil.WalkDir(filepath.Dir(l.Dir), filepath.Base(l.Dir)+"/"+networkDirName(key.Network), false)
	if err != nil {
		return nil
	}
	defer func() { _ = unix.Close(dirfd) }()
	fd, err := fileutil.Openat(dirfd, keyName(key)+lockExt, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer func() { _ = unix.Close(fd) }()
	buf := make([]byte, 4096)
	n, err := unix.Pread(fd, buf, 0)
	if err != nil || n <= 0 {
		return nil
	}
	var h Holder
	if json.Unmarshal(buf[:n], &h) != nil {
		return nil
	}
	return &h
}

type flockUnlocker struct {
	mu   sync.Mutex
	fd   int
	file *lockFile
	key  Key
}

// Unlock unlinks the lock file while still holding the flock, then closes
// it (see FlockLocker). A second Unlock is an error and does nothing: it
// must not unlink a file that a new holder may own by then.
func (u *flockUnlocker) Unlock() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.fd < 0 {
		return fmt.Errorf("unlock attachment %s: already unlocked", u.key)
	}
	fd := u.fd
	u.fd = -1
	var errs []error
	if err := unix.Unlinkat(u.file.dirfd, u.file.name, 0); err != nil && err != unix.ENOENT {
		errs = append(errs, fmt.Errorf("unlink %s: %w", u.file.path(), err))
	}
	if err := unix.Close(fd); err != nil {
		errs = append(errs, fmt.Errorf("close %s: %w", u.file.path(), err))
	}
	u.file.close()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("unlock attachment %s: %w", u.key, err)
	}
	return nil
}
