package cache

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/catena-cni/catena/fileutil"
)

// TeardownIndex is an optional Store capability: a cheap index of the
// records that need teardown, each with when its next attempt is due, so
// that a later ADD can retry the one due soonest without listing every
// record. It is a hint, not state: the record itself is the truth, an entry
// whose record is gone is simply cleared, and GC and repair scan every
// record anyway. Entries need no fsync for the same reason.
type TeardownIndex interface {
	// NotePending notes (or re-notes) that key's record needs teardown,
	// next due as note says.
	NotePending(key Key, note PendingNote) error
	// ClearPending removes the note; a missing note is not an error.
	ClearPending(key Key) error
	// PendingTeardown returns up to max noted keys of network, the one
	// due soonest first (then by key). A note that cannot be read as one
	// is due at once.
	PendingTeardown(network string, max int) ([]Pending, error)
}

var _ TeardownIndex = (*DiskStore)(nil)

// pendingDir holds one file per attachment needing teardown,
// pending/<network>/<containerID>:<ifname> (names.go for long keys), whose content is its
// PendingNote (see EncodeNote). The due time is in the content, not in the
// file's mtime, so that a marker can say "not before" without a clock
// skewed into the future by touch, and carry the attempt count. It is
// rewritten in place without fsync: a torn write reads as a malformed note,
// which is due at once, and the next failed attempt rewrites it.
const pendingDir = "pending"

func (s *DiskStore) pendingPath(key Key) string {
	return filepath.Join(s.dir, pendingDir, networkDirName(key.Network), keyName(key))
}

// NotePending implements TeardownIndex.
func (s *DiskStore) NotePending(key Key, note PendingNote) error {
	if err := key.Validate(); err != nil {
		return fmt.Errorf("note pending teardown: %w", err)
	}
	path := s.pendingPath(key)
	if err := s.fs.MkdirAll(filepath.Dir(path), dirPerm); err != nil {
		return fmt.Errorf("note pending teardown of %s: %w", key, err)
	}
	f, err := s.fs.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, filePerm)
	if err != nil {
		return fmt.Errorf("note pending teardown of %s: %w", key, err)
	}
	_, werr := f.Write(EncodeNote(note))
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("note pending teardown of %s: %w", key, err)
	}
	return nil
}

// ClearPending implements TeardownIndex.
func (s *DiskStore) ClearPending(key Key) error {
	if err := key.Validate(); err != nil {
		return fmt.Errorf("clear pending teardown: %w", err)
	}
	err := s.fs.Remove(s.pendingPath(key))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("clear pending teardown of %s: %w", key, err)
	}
	s.dropLoneStamp(key.Network)
	return nil
}

// PendingTeardown implements TeardownIndex. On the common path, with
// nothing pending, it costs one failed open; otherwise it reads every
// marker of the network.
func (s *DiskStore) PendingTeardown(network string, max int) ([]Pending, error) {
	dir := filepath.Join(s.dir, pendingDir, networkDirName(network))
	if validNetwork(network) != nil {
		return nil, fmt.Errorf("pending teardown: invalid network name %q", network)
	}
	names, err := readDirNames(s.fs, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pending teardown of network %s: %w", network, err)
	}
	var found []Pending
	for _, name := range names {
		key, ok := s.keyOfName(networkDirName(network), name)
		if !ok || key.Network != network {
			continue
		}
		note, bad, ok := s.readNote(s.pendingPath(key))
		if !ok {
			continue
		}
		found = append(found, Pending{Key: key, Note: note, Bad: bad})
	}
	slices.SortFunc(found, func(a, b Pending) int {
		return cmp.Or(a.Note.Due.Compare(b.Note.Due), cmp.Compare(a.Key.String(), b.Key.String()))
	})
	return found[:min(max, len(found))], nil
}

// readNote reads the marker at path; ok is false if it is not a regular
// file (or vanished). Content that cannot be read as a note is due at once,
// and bad says why.
func (s *DiskStore) readNote(path string) (note PendingNote, bad error, ok bool) {
	data, ok, err := s.readHint(path)
	if !ok {
		return PendingNote{}, nil, false
	}
	if err != nil {
		return dueAtOnce(), err, true
	}
	note, err = ParseNote(data)
	if err != nil {
		return note, fmt.Errorf("%s: %w", path, err), true
	}
	return note, nil, true
}

// readHint reads a small hint file of the pending dir (a marker, or the
// retry stamp), at most maxNoteSize+1 bytes of it, never through a
// symlink; ok is false if it is not a regular file (or vanished), and err
// says why a file that is there could not be read.
func (s *DiskStore) readHint(path string) (data []byte, ok bool, err error) {
	fi, err := fileutil.Lstat(s.fs, path)
	if err != nil || !fi.Mode().IsRegular() {
		return nil, false, nil
	}
	f, err := fileutil.OpenReadNoFollow(s.fs, path)
	if err != nil {
		return nil, false, nil
	}
	defer func() { _ = f.Close() }()
	data, err = io.ReadAll(io.LimitReader(f, maxNoteSize+1))
	if err != nil {
		return nil, true, fmt.Errorf("reading %s: %w", path, err)
	}
	return data, true, nil
}
