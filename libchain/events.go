package libchain

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// The event journal: one JSON line (an Op) per operation, appended to
// <cacheDir>/events/events.jsonl and rotated to events.jsonl.1 past
// eventsMaxSize, so that at most twice that is kept. It is observability,
// not state: it is never fsynced, and a failure to write it is logged and
// never fails an operation. catenactl stats and metrics read it.
const (
	eventsDir     = "events"
	eventsFile    = "events.jsonl"
	eventsMaxSize = 4 << 20
)

// EventsPath is where the journal of cacheDir lives.
func EventsPath(cacheDir string) string {
	return filepath.Join(cacheDir, eventsDir, eventsFile)
}

// EventJournal appends Ops to the journal of one cache dir.
type EventJournal struct {
	CacheDir string
}

// Append writes op as one line with a single O_APPEND write, so lines of
// concurrent catena processes never interleave.
func (j *EventJournal) Append(op Op) error {
	line, err := json.Marshal(op)
	if err != nil {
		return fmt.Errorf("event journal: encoding: %w", err)
	}
	line = append(line, '\n')
	path := EventsPath(j.CacheDir)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("event journal: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("event journal: %w", err)
	}
	defer f.Close()
	if _, err := f.Write(line); err != nil {
		return fmt.Errorf("event journal: write %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil || fi.Size() < eventsMaxSize {
		return nil
	}
	return rotate(f, path)
}

// rotate renames a full journal to .1 under an exclusive flock on it, and
// only if path still names that file, so that two processes racing to rotate
// rename once. A writer that still holds the old file appends to .1: nothing
// is lost.
func rotate(f *os.File, path string) error {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil // another process is rotating it
	}
	defer func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN) }()
	var fdSt, pathSt unix.Stat_t
	if unix.Fstat(int(f.Fd()), &fdSt) != nil || unix.Lstat(path, &pathSt) != nil || fdSt.Ino != pathSt.Ino {
		return nil // already rotated
	}
	if err := os.Rename(path, path+".1"); err != nil {
		return fmt.Errorf("event journal: rotate %s: %w", path, err)
	}
	return nil
}
