package nodeconf

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/afero"
	"golang.org/x/sys/unix"
)

// LockName is the interlock file in the conf dir. No runtime loads it (no
// config extension). A process that may write the generated file holds an
// exclusive flock(2) on it for as long as it runs: catena-agent run and
// install for their whole life, catena-agent uninstall from before it
// removes the file until it exits (with --wait: until SIGTERM). So
// uninstall never removes the file while an agent could write it again,
// and an agent started meanwhile writes nothing until uninstall has ended.
// The kernel drops the flock when its holder dies: nothing goes stale.
const LockName = ".catena-agent.lock"

// ErrHeld: another process holds the conf dir's interlock.
var ErrHeld = errors.New("held by another process")

// DirLock is the interlock of one conf dir. It is not safe for concurrent
// use.
type DirLock struct {
	// Path is <conf dir>/LockName.
	Path string
	// Holder describes this process in the file, for others' messages
	// ("catena-agent run (pid 12)").
	Holder string
	f      *os.File
}

// NewDirLock returns the interlock of confDir; holder describes this
// process.
func NewDirLock(confDir, holder string) *DirLock {
	return &DirLock{Path: filepath.Join(confDir, LockName), Holder: holder}
}

// maxLockRetries bounds how often TryLock starts over after finding the
// file it locked unlinked by a previous holder.
const maxLockRetries = 8

// TryLock takes the interlock without waiting. It reports false, with an
// error wrapping ErrHeld and naming the holder, while another process holds
// it, and an error wrapping fs.ErrNotExist when the conf dir is missing.
// Holding it already, it checks that the file is still the one at Path (the
// conf dir may have been replaced) and takes the new one if not.
//
// The unlink race of lock files is closed as in cache.FlockLocker: only a
// holder unlinks the path, and an acquirer whose locked inode is no longer
// the one at the path starts over.
func (l *DirLock) TryLock() (bool, error) {
	if l.f != nil {
		if l.current() {
			return true, nil
		}
		_ = l.f.Close() // the old dir's lock: nobody else can be using it as a conf dir
		l.f = nil
	}
	for range maxLockRetries {
		f, err := os.OpenFile(l.Path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return false, fmt.Errorf("opening the interlock %s: %w", l.Path, err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			_ = f.Close() // only read from
			if errors.Is(err, unix.EWOULDBLOCK) {
				return false, fmt.Errorf("%s is %w: %s", l.Path, ErrHeld, l.holder())
			}
			return false, fmt.Errorf("locking %s: %w", l.Path, err)
		}
		l.f = f
		if !l.current() {
			_ = f.Close() // unlinked by the previous holder: start over
			l.f = nil
			continue
		}
		if err := l.describe(); err != nil {
			return false, errors.Join(err, l.Unlock())
		}
		return true, nil
	}
	return false, fmt.Errorf("locking %s: the file was replaced %d times in a row", l.Path, maxLockRetries)
}

// current: the locked file is the one at Path.
func (l *DirLock) current() bool { return sameFile(l.f, l.Path) }

// describe writes Holder into the locked file.
func (l *DirLock) describe() error {
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("truncating %s: %w", l.Path, err)
	}
	if _, err := l.f.WriteAt([]byte(l.Holder+"\n"), 0); err != nil {
		return fmt.Errorf("writing %s: %w", l.Path, err)
	}
	return nil
}

// holder returns what the file says of its holder.
func (l *DirLock) holder() string {
	data, err := readRegular(afero.NewOsFs(), l.Path, 256)
	if err != nil || len(strings.TrimSpace(string(data))) == 0 {
		return "a process that has not said who it is"
	}
	return strings.TrimSpace(string(data))
}

// Held reports whether this process holds the interlock.
func (l *DirLock) Held() bool { return l != nil && l.f != nil }

// Unlock removes the file while still holding it, then releases it. Not
// holding it is not an error.
func (l *DirLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	var errs []error
	if sameFile(f, l.Path) {
		if err := os.Remove(l.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing %s: %w", l.Path, err))
		}
	}
	if err := f.Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing %s: %w", l.Path, err))
	}
	return errors.Join(errs...)
}

// sameFile: f is the file at path (not followed).
func sameFile(f *os.File, path string) bool {
	var held, named unix.Stat_t
	if unix.Fstat(int(f.Fd()), &held) != nil || unix.Lstat(path, &named) != nil {
		return false
	}
	return held.Dev == named.Dev && held.Ino == named.Ino
}

// holdConfDir takes the Installer's interlock, if it has one, before a
// pass writes anything; a conf dir that does not exist yet, or is mounted
// read-only, has nothing to protect.
func (i *Installer) holdConfDir() error {
	if i.Interlock == nil {
		return nil
	}
	_, err := i.Interlock.TryLock()
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.EROFS) {
		// No dir, or nobody can write to it: nothing to interlock, and a
		// file already in place stays ready.
		return nil
	}
	if errors.Is(err, ErrHeld) {
		return fmt.Errorf("%w; writing nothing until it exits (catena-agent uninstall holds it until it ends; a second agent waits for the first)", err)
	}
	return err
}

// Close releases the interlock, removing its file. The generated file and
// the binaries stay.
func (i *Installer) Close() error {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.Interlock.Unlock()
}
