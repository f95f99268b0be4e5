package cache

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// TeardownIndex is an optional Store capability: a cheap index of the
// records that need teardown, so that a later ADD can retry one without
// listing every record. It is a hint, not state: the record itself is the
// truth, an entry whose record is gone is simply cleared, and GC and repair
// scan every record anyway. Entries need no fsync for the same reason.
type TeardownIndex interface {
	// MarkTeardown notes that key's record needs teardown.
	MarkTeardown(key Key) error
	// ClearTeardown removes the note; a missing note is not an error.
	ClearTeardown(key Key) error
	// PendingTeardown returns up to max noted keys of network, oldest note
	// first.
	PendingTeardown(network string, max int) ([]Key, error)
}

var _ TeardownIndex = (*DiskStore)(nil)

// pendingDir holds one empty file per attachment needing teardown:
// pending/<network>/<containerID>:<ifname> (names.go for long keys).
const pendingDir = "pending"

func (s *DiskStore) pendingPath(key Key) string {
	return filepath.Join(s.dir, pendingDir, networkDirName(key.Network), keyName(key))
}

// MarkTeardown implements TeardownIndex.
func (s *DiskStore) MarkTeardown(key Key) error {
	if err := key.Validate(); err != nil {
		return fmt.Errorf("mark teardown: %w", err)
	}
	path := s.pendingPath(key)
	if err := s.fs.MkdirAll(filepath.Dir(path), dirPerm); err != nil {
		return fmt.Errorf("mark teardown of %s: %w", key, err)
	}
	f, err := s.fs.OpenFile(path, os.O_CREATE|os.O_WRONLY, filePerm)
	if err != nil {
		return fmt.Errorf("mark teardown of %s: %w", key, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("mark teardown of %s: %w", key, err)
	}
	return nil
}

// ClearTeardown implements TeardownIndex.
func (s *DiskStore) ClearTeardown(key Key) error {
	if err := key.Validate(); err != nil {
		return fmt.Errorf("clear teardown: %w", err)
	}
	if err := s.fs.Remove(s.pendingPath(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("clear teardown of %s: %w", key, err)
	}
	return nil
}

// PendingTeardown implements TeardownIndex. On the common path, with
// nothing pending, it costs one failed open.
func (s *DiskStore) PendingTeardown(network string, max int) ([]Key, error) {
	dir := filepath.Join(s.dir, pendingDir, networkDirName(network))
	if (Key{Network: network, ContainerID: "x", IfName: "x"}).Validate() != nil {
		return nil, fmt.Errorf("pending teardown: invalid network name %q", network)
	}
	names, err := readDirNames(s.fs, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pending teardown of network %s: %w", network, err)
	}
	type noted struct {
		key Key
		at  int64
	}
	var found []noted
	for _, name := range names {
		key, ok := s.keyOfName(networkDirName(network), name)
		if !ok || key.Network != network {
			continue
		}
		fi, err := lstat(s.fs, filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		found = append(found, noted{key, fi.ModTime().UnixNano()})
	}
	slices.SortFunc(found, func(a, b noted) int { return cmp.Compare(a.at, b.at) })
	keys := make([]Key, 0, min(max, len(found)))
	for i := 0; i < len(found) && i < max; i++ {
		keys = append(keys, found[i].key)
	}
	return keys, nil
}
