package main

import (
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/catena-cni/catena/cache"
)

// lockPath is where the catena plugin's FlockLocker keeps key's lock.
func lockPath(cacheDir string, key cache.Key) string {
	return cache.NewFlockLocker(filepath.Join(cacheDir, cache.LocksDir)).Path(key)
}

// pidAlive reports whether a process with pid exists.
func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := unix.Kill(pid, 0)
	return err == nil || err == unix.EPERM
}
