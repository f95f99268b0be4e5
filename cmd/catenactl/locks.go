package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/catena-cni/catena/cache"
)

// lockState is what a look at one lock file found.
type lockState struct {
	Held bool
	// Raw is the holder as written in the lock file (JSON), if held.
	Raw []byte
	// Holder is Raw decoded; nil if it does not decode (the holder may not
	// have written it yet).
	Holder *cache.Holder
}

// lockPath is where the catena plugin's FlockLocker keeps key's lock.
func lockPath(cacheDir string, key cache.Key) string {
	return cache.NewFlockLocker(filepath.Join(cacheDir, cache.LocksDir)).Path(key)
}

// probeLock tells whether the flock of the lock file at path is held,
// without taking part in the locking protocol: it opens the file read-only
// (never creating it) and tries a shared flock without waiting, which it
// drops at once. A missing file is a free lock.
func probeLock(path string) (lockState, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ENOENT) {
		return lockState{}, nil
	}
	if err != nil {
		return lockState{}, fmt.Errorf("open lock %s: %w", path, err)
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
		return lockState{}, nil // closing the fd drops the shared lock
	case err != unix.EWOULDBLOCK:
		return lockState{}, fmt.Errorf("flock %s: %w", path, err)
	}
	buf := make([]byte, 4096)
	n, err := unix.Pread(fd, buf, 0)
	if err != nil {
		return lockState{Held: true}, fmt.Errorf("read holder of %s: %w", path, err)
	}
	st := lockState{Held: true, Raw: bytes.TrimSpace(buf[:max(n, 0)])}
	var h cache.Holder
	if json.Unmarshal(st.Raw, &h) == nil {
		st.Holder = &h
	}
	return st, nil
}

// pidAlive reports whether a process with pid exists.
func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := unix.Kill(pid, 0)
	return err == nil || err == unix.EPERM
}
