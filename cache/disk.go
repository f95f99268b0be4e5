package cache

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/fileutil"
)

// Layout of a DiskStore under its dir:
//
//	records/<network>/<containerID>:<ifname>.json   one record per attachment
//	quarantine/<network>_<containerID>:<ifname>.<unixnano>.json
//
// ':' is illegal in both container IDs and ifnames, so a record's name is
// unambiguous. A key or network too long for a file name is hashed
// (names.go). Directories are 0700 and files 0600, all owned by Catena's
// user and reached without following a symlink (fileutil.TrustedFs).
// Locks are not kept here: they belong to the Locker (e.g. a FlockLocker on
// <dir>/locks).
const (
	recordsDir    = "records"
	quarantineDir = "quarantine"
	recordExt     = ".json"

	// maxRecordSize bounds what Load reads; real records are a few KB.
	maxRecordSize = 16 << 20
)

// DiskStore is the durable Store: one file per attachment, a short sequence
// of self-checking entries (recordfile.go). It embeds the Locker that
// serialises the attachments.
type DiskStore struct {
	Locker
	fs   afero.Fs
	dir  string
	memo writeMemo // what Save last wrote, per key (recordfile_memo.go)
}

var _ Store = (*DiskStore)(nil)

// NewDiskStore returns a store rooted at dir on fsys, locking attachments
// with locker. Nothing is created until the first Save. locker must not be
// nil. On the real disk (an *afero.OsFs) every path under dir is walked
// with openat and checked (TrustedFs).
func NewDiskStore(fsys afero.Fs, dir string, locker Locker) *DiskStore {
	if locker == nil {
		panic("cache: NewDiskStore with a nil locker")
	}
	dir = filepath.Clean(dir)
	return &DiskStore{Locker: locker, fs: fileutil.TrustedFs(fsys, dir), dir: dir}
}

// Path returns where key's record lives, or "" if key is invalid. It is meant
// for operators and tests; it does not look at the filesystem.
func (s *DiskStore) Path(key Key) string {
	if key.Validate() != nil {
		return ""
	}
	return s.recordPath(key)
}

func (s *DiskStore) networkDir(network string) string {
	return filepath.Join(s.dir, recordsDir, networkDirName(network))
}

func (s *DiskStore) recordPath(key Key) string {
	return filepath.Join(s.networkDir(key.Network), keyName(key)+recordExt)
}

// checkNetworkDir lstats records/<network>. It reports exists=false if it is
// missing, an ErrCorrupt-wrapped error if it is a symlink or not a
// directory (the store never follows a link out of its dir; Quarantine
// moves it aside), and an *UntrustedError if another user owns it or could
// write it.
func (s *DiskStore) checkNetworkDir(key Key) (exists bool, err error) {
	dir := s.networkDir(key.Network)
	fi, err := fileutil.Lstat(s.fs, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("record %s: %w", key, err)
	}
	if err := fileutil.CheckOwned(dir, fi); err != nil {
		return true, fmt.Errorf("record %s: %w", key, err)
	}
	if err := checkDirInfo(fi); err != nil {
		return true, fmt.Errorf("record %s: %w: network dir %s %w", key, ErrCorrupt, dir, err)
	}
	if err := fileutil.CheckTrustedDir(dir, fi); err != nil {
		return true, fmt.Errorf("record %s: %w", key, err)
	}
	return true, nil
}

// Load returns key's record, ErrNotFound, an *UntrustedError (wrapping
// ErrUntrusted) if the record or a directory above it belongs to another
// user or could be written by one, or an error wrapping ErrCorrupt for
// anything else that cannot be trusted: a symlink, a directory or other
// non-regular file, a file readable or writable by group or others, or
// content that does not decode or names another attachment.
func (s *DiskStore) Load(key Key) (*Record, error) {
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("load record: %w", err)
	}
	exists, err := s.checkNetworkDir(key)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, fmt.Errorf("load record %s: %w", key, ErrNotFound)
	}
	path := s.recordPath(key)
	fi, err := fileutil.Lstat(s.fs, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("load record %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("load record %s: %w", key, err)
	}
	if err := checkRecordEntry(path, fi); err != nil {
		return nil, fmt.Errorf("load record %s: %w", key, err)
	}
	data, err := s.readRecord(key.String(), path)
	if err != nil {
		return nil, err
	}
	rec, err := decodeRecordFile(data)
	if err != nil {
		return nil, fmt.Errorf("load record %s from %s: %w", key, path, err)
	}
	if rec.Key != key {
		return nil, fmt.Errorf("load record %s: %w: %s holds the record of %s", key, ErrCorrupt, path, rec.Key)
	}
	return rec, nil
}

// readRecord opens path without following symlinks and re-checks what was
// opened, closing the window between the lstat and the open.
func (s *DiskStore) readRecord(key, path string) ([]byte, error) {
	f, err := fileutil.OpenReadNoFollow(s.fs, path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("load record %s: %w", key, ErrNotFound)
	case fileutil.IsSymlinkLoop(err):
		return nil, fmt.Errorf("load record %s: %w: %s is a symlink", key, ErrCorrupt, path)
	case err != nil:
		return nil, fmt.Errorf("load record %s: %w", key, err)
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("load record %s: stat %s: %w", key, path, err)
	}
	if err := checkRecordEntry(path, fi); err != nil {
		return nil, fmt.Errorf("load record %s: %w", key, err)
	}
	// read at its size at once (io.ReadAll would grow a buffer from 512
	// bytes, allocating twice a padded record's size), one byte over the
	// bound to see a file too large
	var buf bytes.Buffer
	buf.Grow(int(min(fi.Size(), maxRecordSize)) + bytes.MinRead)
	_, err = buf.ReadFrom(io.LimitReader(f, maxRecordSize+1))
	data := buf.Bytes()
	if err != nil {
		return nil, fmt.Errorf("load record %s: read %s: %w", key, path, err)
	}
	if len(data) > maxRecordSize {
		return nil, fmt.Errorf("load record %s: %w: %s is too large", key, ErrCorrupt, path)
	}
	return data, nil
}

// Save sets rec.Updated (and rec.Schema) and durably writes the record: the
// first write creates it by a durable replace, later ones append to its
// entries (see recordfile.go), as a delta of the steps that changed when the
// file is still as this store last wrote it (delta.go). The common path
// costs one lstat, one append and one fdatasync.
func (s *DiskStore) Save(rec *Record) error {
	if rec == nil {
		return errors.New("save record: nil record")
	}
	key := rec.Key
	if err := key.Validate(); err != nil {
		return fmt.Errorf("save record: %w", err)
	}
	// A delta only against the file exactly as this store last wrote it
	// (saveEntry checks the signature on the handle it appends through); a
	// Save that fails leaves nothing remembered.
	prev, ok := s.memo.take(key)
	exists, err := s.checkNetworkDir(key)
	if err != nil {
		return fmt.Errorf("save: %w", err)
	}
	if !exists {
		if err := fileutil.MkdirAllDurable(s.fs, s.networkDir(key.Network), dirPerm); err != nil {
			return fmt.Errorf("save record %s: %w", key, err)
		}
	}
	rec.Updated = time.Now().UTC()
	rec.Schema = SchemaVersion
	if err := validateRecord(rec); err != nil {
		return fmt.Errorf("save record %s: %w", key, err)
	}
	raw, sums, err := stepSums(rec)
	if err != nil {
		return fmt.Errorf("save: %w", err)
	}
	var delta []byte
	if ok && len(prev.sums) == len(sums) {
		if delta, err = encodeDelta(rec, raw, sums, prev.sums); err != nil {
			return fmt.Errorf("save: %w", err)
		}
	}
	// The full snapshot is encoded only if it is written (most Saves of an
	// ADD write a delta), and once.
	full := sync.OnceValues(func() ([]byte, error) {
		data, err := Encode(rec)
		if err != nil {
			return nil, fmt.Errorf("save: %w", err)
		}
		if len(data) > maxRecordSize {
			return nil, fmt.Errorf("save record %s: %w: %d bytes, Load accepts at most %d", key, ErrTooLarge, len(data), maxRecordSize)
		}
		return data, nil
	})
	sig, err := saveEntry(s.fs, s.recordPath(key), full, delta, prev.sig, len(rec.Steps))
	if err != nil {
		return fmt.Errorf("save record %s: %w", key, err)
	}
	s.memo.put(key, lastWrite{sums: sums, sig: sig})
	return nil
}

// Remove durably deletes key's record; a missing record is not an error.
// Through a symlinked network dir it refuses (ErrCorrupt) rather than remove
// something outside the store: Quarantine deals with that.
func (s *DiskStore) Remove(key Key) error {
	if err := key.Validate(); err != nil {
		return fmt.Errorf("remove record: %w", err)
	}
	exists, err := s.checkNetworkDir(key)
	if err != nil {
		return fmt.Errorf("remove: %w", err)
	}
	s.memo.forget(key)
	if !exists {
		return nil
	}
	// Also the temp file a crash may have left (only key's lock holder
	// creates it); RemoveDurable's directory sync covers both.
	if err := fileutil.RemoveTemp(s.fs, s.recordPath(key)); err != nil {
		return fmt.Errorf("remove record %s: %w", key, err)
	}
	if _, err := fileutil.RemoveDurable(s.fs, s.recordPath(key)); err != nil {
		return fmt.Errorf("remove record %s: %w", key, err)
	}
	return nil
}
