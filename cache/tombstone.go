package cache

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/catena-cni/catena/fileutil"
)

// The bounds a tombstone is kept within: one that no runtime's DEL came to
// clear is pruned TombstoneMaxAge after its teardown, and a network keeps
// at most the TombstoneMaxCount newest.
const (
	TombstoneMaxAge   = 7 * 24 * time.Hour
	TombstoneMaxCount = 4096
)

// Tombstone says that Catena tore an attachment down completely outside
// the runtime's own DEL of it (a retry pass, GC, a reclaim, a repair), so
// that the runtime may still hold the ADD's result and DEL the key again
// with it: libcni keeps its cached result whenever a DEL failed, and
// libcni's GC DELs a stale entry with it. Such a DEL must invoke no
// delegate: the IP and rules the result names may belong to another pod
// by then. The runtime's next DEL of the key clears the tombstone.
type Tombstone struct {
	Key Key `json:"key"`
	// Released is when the teardown completed.
	Released time.Time `json:"released"`
	// By names who tore it down (retry, gc, reclaim, repair, add).
	By string `json:"by"`
	// IPs are the addresses the attachment's last result named.
	IPs []string `json:"ips,omitempty"`
}

// Tombstones is an optional Store capability: the tombstones of
// attachments torn down outside the runtime's DEL. A tombstone is written
// durably before the record is removed; a missing one costs a DEL no
// safety on its own, since a DEL with no record still checks every live
// record before it releases anything.
type Tombstones interface {
	// Bury durably writes t; a Bury of a key that has one replaces it.
	Bury(t Tombstone) error
	// TombstoneOf returns key's tombstone, or ErrNotFound.
	TombstoneOf(key Key) (*Tombstone, error)
	// Unbury durably removes key's tombstone; a missing one is not an
	// error.
	Unbury(key Key) error
	// PruneTombstones removes network's tombstones released before
	// now-maxAge, then the oldest beyond the maxCount newest, and returns
	// their keys.
	PruneTombstones(network string, now time.Time, maxAge time.Duration, maxCount int) ([]Key, error)
}

var _ Tombstones = (*DiskStore)(nil)

const (
	// tombstonesDir holds tombstones/<network>/<name>.json, named as
	// records are (names.go).
	tombstonesDir = "tombstones"
	// maxTombstoneSize bounds what TombstoneOf reads.
	maxTombstoneSize = 8 << 10
	// maxTombstoneIPs bounds the addresses one tombstone keeps.
	maxTombstoneIPs = 32
)

func (s *DiskStore) tombstonePath(key Key) string {
	return filepath.Join(s.dir, tombstonesDir, networkDirName(key.Network), keyName(key)+recordExt)
}

// Bury implements Tombstones.
func (s *DiskStore) Bury(t Tombstone) error {
	if err := t.Key.Validate(); err != nil {
		return fmt.Errorf("bury: %w", err)
	}
	t.IPs = t.IPs[:min(len(t.IPs), maxTombstoneIPs)]
	data, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("bury %s: %w", t.Key, err)
	}
	path := s.tombstonePath(t.Key)
	if err := fileutil.MkdirAllDurable(s.fs, filepath.Dir(path), dirPerm); err != nil {
		return fmt.Errorf("bury %s: %w", t.Key, err)
	}
	if err := fileutil.WriteFileDurable(s.fs, path, data); err != nil {
		return fmt.Errorf("bury %s: %w", t.Key, err)
	}
	return nil
}

// TombstoneOf implements Tombstones. A tombstone that cannot be trusted
// (a symlink, another user's, one that does not decode or names another
// key) is an error, not ErrNotFound: the caller keeps on that doubt.
func (s *DiskStore) TombstoneOf(key Key) (*Tombstone, error) {
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("tombstone: %w", err)
	}
	t, err := s.readTombstone(s.tombstonePath(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("tombstone of %s: %w", key, err)
	}
	if t.Key != key {
		return nil, fmt.Errorf("tombstone of %s: %w: it names %s", key, ErrCorrupt, t.Key)
	}
	return t, nil
}

func (s *DiskStore) readTombstone(path string) (*Tombstone, error) {
	data, err := readBounded(s.fs, path, maxTombstoneSize)
	if err != nil {
		return nil, err
	}
	var t Tombstone
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return &t, nil
}

// Unbury implements Tombstones.
func (s *DiskStore) Unbury(key Key) error {
	if err := key.Validate(); err != nil {
		return fmt.Errorf("unbury: %w", err)
	}
	path := s.tombstonePath(key)
	if _, err := fileutil.Lstat(s.fs, path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if _, err := fileutil.RemoveDurable(s.fs, path); err != nil {
		return fmt.Errorf("unbury %s: %w", key, err)
	}
	return nil
}

// PruneTombstones implements Tombstones. Only regular files named as
// tombstones are looked at; one that cannot be read is dated by its
// mtime. It goes on past a file it cannot remove and reports the errors.
func (s *DiskStore) PruneTombstones(network string, now time.Time, maxAge time.Duration, maxCount int) ([]Key, error) {
	if validNetwork(network) != nil {
		return nil, fmt.Errorf("prune tombstones: invalid network name %q", network)
	}
	dir := filepath.Join(s.dir, tombstonesDir, networkDirName(network))
	if _, err := fileutil.Lstat(s.fs, dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return s.pruneNetworkTombstones(dir, now.Add(-maxAge), maxCount)
}

type tombEntry struct {
	path string
	key  Key
	at   time.Time
}

func (s *DiskStore) pruneNetworkTombstones(dir string, before time.Time, maxCount int) ([]Key, error) {
	fi, err := fileutil.Lstat(s.fs, dir)
	if err != nil {
		return nil, fmt.Errorf("prune tombstones: %w", err)
	}
	if err := checkDirInfo(fi); err != nil {
		return nil, fmt.Errorf("prune tombstones: %s %w", dir, err)
	}
	names, err := readDirNames(s.fs, dir)
	if err != nil {
		return nil, fmt.Errorf("prune tombstones: %w", err)
	}
	var all []tombEntry
	for _, name := range names {
		if !strings.HasSuffix(name, recordExt) || strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(dir, name)
		fi, err := fileutil.Lstat(s.fs, path)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		e := tombEntry{path: path, at: fi.ModTime()}
		if t, err := s.readTombstone(path); err == nil {
			e.key, e.at = t.Key, t.Released
		}
		all = append(all, e)
	}
	slices.SortFunc(all, func(a, b tombEntry) int { return cmp.Compare(b.at.UnixNano(), a.at.UnixNano()) })
	var pruned []Key
	var errs []error
	for i, e := range all {
		if i < maxCount && !e.at.Before(before) {
			continue
		}
		if err := s.fs.Remove(e.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("prune tombstone %s: %w", e.path, err))
			continue
		}
		pruned = append(pruned, e.key)
	}
	if len(pruned) > 0 {
		errs = append(errs, fileutil.SyncDir(s.fs, dir))
	}
	return pruned, errors.Join(errs...)
}
