package cache

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// LockState is what a look at one lock file found.
type LockState struct {
	Held bool
	// Raw is the holder as written in the lock file (JSON), if held.
	Raw []byte
	// Holder is Raw decoded; nil if it does not decode (the holder may not
	// have written it yet).
	Holder *Holder
}

// ProbeLock tells whether the flock of the lock file at path is held,
// without taking part in the locking protocol: it opens the file read-only
// (never creating it, never following a symlink) and tries a shared flock
// without waiting, which it drops at once. A missing file is a free lock.
func ProbeLock(path string) (LockState, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ENOENT) {
		return LockState{}, nil
	}
	if err != nil {
		return LockState{}, fmt.Errorf("open lock %s: %w", path, err)
	}
	defer func() { _ = unix.Close(fd) }()
	for {
		err = unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB)
		if err != unix.EINTR {
			break
		}
	}
	switch {
	case err == nil:
		return LockState{}, nil // closing the fd drops the shared lock
	case err != unix.EWOULDBLOCK:
		return LockState{}, fmt.Errorf("flock %s: %w", path, err)
	}
	buf := make([]byte, 4096)
	n, err := unix.Pread(fd, buf, 0)
	if err != nil {
		return LockState{Held: true}, fmt.Errorf("read holder of %s: %w", path, err)
	}
	st := LockState{Held: true, Raw: bytes.TrimSpace(buf[:max(n, 0)])}
	var h Holder
	if json.Unmarshal(st.Raw, &h) == nil {
		st.Holder = &h
	}
	return st, nil
}
