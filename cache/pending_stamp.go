package cache

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/catena-cni/catena/fileutil"
)

// A network's retry stamp, pending/<network>/.due, lets a runtime's call
// decide whether a retry pass of the network's pending teardowns may be
// due without reading a single marker: a retrier writes it after each pass
// with the earliest due time it left and the pending dir's mtime it saw.
// A marker created or removed since changes that mtime, so the stamp no
// longer matches and a pass is due; a marker rewritten in place (a failed
// retry) is never due sooner than what the stamp already says. Like the
// markers it is a hint, written in place without fsync: a missing, torn or
// foreign-looking stamp just means "due", and the pass that follows reads
// the markers themselves. ".due" can never be a marker's name (a key's
// file name holds a ':' or starts with "h-").
const retryStampName = ".due"

// RetryStamp is what a retry stamp says.
type RetryStamp struct {
	// Next is when the earliest pending teardown left is due.
	Next time.Time
	// DirMtime is the pending dir's mtime (Unix ns) when the markers
	// were read; 0 is unknown and never matches.
	DirMtime int64
}

// mtimeSettle is how long a retrier waits after the pending dir's last
// change before it reads the markers: file times come from a coarse clock
// (a few ms), and a marker created within the same tick as the mtime the
// stamp keeps would not change it.
const mtimeSettle = 10 * time.Millisecond

func (s *DiskStore) pendingNetDir(network string) string {
	return filepath.Join(s.dir, pendingDir, networkDirName(network))
}

// RetryDue reports whether a retry pass of network's pending teardowns may
// be due at now. It reads no marker: with no pending dir it costs one failed
// lstat; with a stamp, an lstat and a read of the stamp; with a pending dir
// but no stamp (none written yet, or removed by a retrier that found
// nothing pending), a listing of the dir.
func (s *DiskStore) RetryDue(network string, now time.Time) (bool, error) {
	if validNetwork(network) != nil {
		return false, fmt.Errorf("retry due: invalid network name %q", network)
	}
	dir := s.pendingNetDir(network)
	fi, err := fileutil.Lstat(s.fs, dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("retry due of network %s: %w", network, err)
	}
	st, ok := s.readStamp(filepath.Join(dir, retryStampName))
	if !ok {
		// No stamp (a retrier found nothing pending, or none ran yet):
		// due if the dir holds anything.
		names, err := readDirNames(s.fs, dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("retry due of network %s: %w", network, err)
		}
		return len(names) > 0, nil
	}
	if st.DirMtime == 0 || st.DirMtime != fi.ModTime().UnixNano() {
		return true, nil
	}
	return !now.Before(st.Next), nil
}

// readStamp reads a stamp; ok is false if it is missing or not one.
func (s *DiskStore) readStamp(path string) (RetryStamp, bool) {
	data, ok, err := s.readHint(path)
	if !ok || err != nil {
		return RetryStamp{}, false
	}
	st, err := parseStamp(data)
	return st, err == nil
}

// parseStamp reads "v1 <next, Unix ns> <dir mtime, Unix ns>\n".
func parseStamp(data []byte) (RetryStamp, error) {
	line, ok := bytes.CutSuffix(data, []byte("\n"))
	fields := bytes.Split(line, []byte(" "))
	if !ok || len(data) > maxNoteSize || len(fields) != 3 || string(fields[0]) != noteVersion {
		return RetryStamp{}, errors.New("malformed retry stamp")
	}
	next, err := parseDecimal(fields[1], math.MaxInt64)
	if err != nil {
		return RetryStamp{}, fmt.Errorf("retry stamp: next: %w", err)
	}
	mtime, err := parseDecimal(fields[2], math.MaxInt64)
	if err != nil {
		return RetryStamp{}, fmt.Errorf("retry stamp: mtime: %w", err)
	}
	return RetryStamp{Next: time.Unix(0, int64(next)).UTC(), DirMtime: int64(mtime)}, nil
}

func encodeStamp(st RetryStamp) []byte {
	next := max(st.Next.UnixNano(), 0)
	if st.Next.Before(time.Unix(0, 0)) {
		next = 0
	}
	return []byte(noteVersion + " " + strconv.FormatInt(next, 10) + " " + strconv.FormatInt(max(st.DirMtime, 0), 10) + "\n")
}

// StampRetry writes network's retry stamp after a pass: the earliest due
// time of its markers (at most horizon after now, so that a change the
// stamp missed waits no longer than that), and the pending dir's mtime as
// it was when the markers were read. With no pending dir there is nothing
// to stamp, and with no marker left the stamp is removed (the zero stamp
// is returned). now is the clock.
func (s *DiskStore) StampRetry(network string, now func() time.Time, horizon time.Duration) (RetryStamp, error) {
	if validNetwork(network) != nil {
		return RetryStamp{}, fmt.Errorf("retry stamp: invalid network name %q", network)
	}
	dir := s.pendingNetDir(network)
	path := filepath.Join(dir, retryStampName)
	// Create it first: its creation changes the dir's mtime.
	f, err := s.fs.OpenFile(path, os.O_CREATE|os.O_WRONLY, filePerm)
	if errors.Is(err, fs.ErrNotExist) {
		return RetryStamp{}, nil
	}
	if err != nil {
		return RetryStamp{}, fmt.Errorf("retry stamp of network %s: %w", network, err)
	}
	defer func() { _ = f.Close() }()
	var mtime int64 // unknown: the tests' in-memory fs keeps no dir mtime
	if fileutil.IsRealDisk(s.fs) {
		if mtime, err = s.settledMtime(dir); err != nil {
			return RetryStamp{}, fmt.Errorf("retry stamp of network %s: %w", network, err)
		}
	}
	pending, err := s.PendingTeardown(network, 1)
	if err != nil {
		return RetryStamp{}, fmt.Errorf("retry stamp of network %s: %w", network, err)
	}
	if len(pending) == 0 {
		// Nothing pending: no stamp, and an empty dir is never due.
		if err := s.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return RetryStamp{}, fmt.Errorf("retry stamp of network %s: %w", network, err)
		}
		return RetryStamp{}, nil
	}
	st := RetryStamp{Next: now().Add(horizon), DirMtime: mtime}
	if len(pending) > 0 && pending[0].Note.Due.Before(st.Next) {
		st.Next = pending[0].Note.Due
	}
	if err := f.Truncate(0); err != nil {
		return st, fmt.Errorf("retry stamp of network %s: %w", network, err)
	}
	if _, err := f.WriteAt(encodeStamp(st), 0); err != nil {
		return st, fmt.Errorf("retry stamp of network %s: %w", network, err)
	}
	return st, nil
}

// settledMtime returns dir's mtime once it is at least mtimeSettle old by
// the wall clock (the file system's), so that any later change gets a
// later mtime.
func (s *DiskStore) settledMtime(dir string) (int64, error) {
	for range 10 {
		fi, err := fileutil.Lstat(s.fs, dir)
		if err != nil {
			return 0, err
		}
		age := time.Since(fi.ModTime())
		if age >= mtimeSettle || age < -time.Second {
			return fi.ModTime().UnixNano(), nil
		}
		time.Sleep(mtimeSettle - age)
	}
	return 0, nil // still changing: unknown, never matches
}

// RetryScheduler is an optional Store capability: the retry stamps that
// let a runtime's call skip the teardown index when no retry is due.
type RetryScheduler interface {
	// RetryDue reports whether a retry pass of network may be due at now,
	// reading no marker.
	RetryDue(network string, now time.Time) (bool, error)
	// StampRetry writes network's stamp after a pass (see above).
	StampRetry(network string, now func() time.Time, horizon time.Duration) (RetryStamp, error)
}

var _ RetryScheduler = (*DiskStore)(nil)

// dropLoneStamp removes network's retry stamp once its last marker is
// cleared, so that nothing is left in the pending dir when nothing is
// pending. A marker created meanwhile finds no stamp, which only means a
// pass may be due. Best effort: a stamp left behind is a hint as well.
func (s *DiskStore) dropLoneStamp(network string) {
	dir := s.pendingNetDir(network)
	names, err := readDirNames(s.fs, dir)
	if err != nil || len(names) != 1 || names[0] != retryStampName {
		return
	}
	_ = s.fs.Remove(filepath.Join(dir, retryStampName))
}
