package fileutil

import (
	"fmt"
	"os"
	"runtime"
	"syscall"

	"github.com/spf13/afero"
	"golang.org/x/sys/unix"
)

// SyncFile flushes f to disk: its data and the size it implies
// (fdatasync) when dataOnly, else everything (fsync).
//
// In a process of one P (catena: plugins/catena/runtime.go) a real file is
// flushed by a raw system call, which the Go scheduler does not see: the P
// stays with the flushing thread, no hand-off, and the runtime's monitor is
// not woken at its end (20 ADD+DEL: 2,475 futex calls against 2,843, the
// same nanosleeps; libchain/invoke/spawn.go). Nothing else could have used the P
// then. With more Ps (catena-agent, catenactl) the ordinary call leaves the
// other goroutines their P; so do the test filesystems.
func SyncFile(f afero.File, dataOnly bool) error {
	sc, ok := f.(syscall.Conn)
	if !ok || runtime.GOMAXPROCS(0) != 1 {
		return plainSync(f, dataOnly)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return plainSync(f, dataOnly)
	}
	trap, op := uintptr(unix.SYS_FSYNC), "sync"
	if dataOnly {
		trap, op = unix.SYS_FDATASYNC, "fdatasync"
	}
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		for {
			if _, _, errno = unix.RawSyscall(trap, fd, 0, 0); errno != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return &os.PathError{Op: op, Path: f.Name(), Err: err}
	}
	switch {
	case errno == 0:
		return nil
	case dataOnly:
		return fmt.Errorf("fdatasync: %w", errno)
	}
	return &os.PathError{Op: op, Path: f.Name(), Err: errno}
}

// plainSync is SyncFile through the ordinary calls.
func plainSync(f afero.File, dataOnly bool) error {
	if !dataOnly {
		return f.Sync()
	}
	if osf, ok := f.(interface{ Fd() uintptr }); ok {
		for {
			err := unix.Fdatasync(int(osf.Fd()))
			if err != unix.EINTR {
				if err != nil {
					return fmt.Errorf("fdatasync: %w", err)
				}
				return nil
			}
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync: %w", err)
	}
	return nil
}

// SyncDir fsyncs a directory so that a create, rename or unlink in it is
// durable.
func SyncDir(fsys afero.Fs, dir string) error {
	d, err := fsys.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir %s: %w", dir, err)
	}
	if err := SyncFile(d, false); err != nil {
		_ = d.Close()
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	if err := d.Close(); err != nil {
		return fmt.Errorf("close dir %s: %w", dir, err)
	}
	return nil
}
