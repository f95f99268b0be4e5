package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/catena-cni/catena/fileutil"
)

// SweepTemps removes the temp files that a crash in the middle of a durable
// replace left in network's record dir, if they were last modified before
// olderThan. A record's temp file (fileutil.TempPath) is removed only while its
// attachment's lock is free, so a write in progress never loses its temp
// file. Remove already unlinks the temp file of the record it removes; the
// sweep catches those of records that were never created (a crash during
// an ADD's first write, after which DEL finds no record) and hands back
// their paths.
func (s *DiskStore) SweepTemps(network string, olderThan time.Time) ([]string, error) {
	probe := Key{Network: network, ContainerID: "x", IfName: "x"}
	if err := probe.Validate(); err != nil {
		return nil, fmt.Errorf("sweep temp files: %w", err)
	}
	exists, err := s.checkNetworkDir(probe)
	if err != nil || !exists {
		return nil, err
	}
	dir := s.networkDir(network)
	names, err := readDirNames(s.fs, dir)
	if err != nil {
		return nil, fmt.Errorf("sweep temp files of network %q: %w", network, err)
	}
	var removed []string
	var errs []error
	for _, name := range names {
		path := filepath.Join(dir, name)
		key, ok := s.tempKey(filepath.Base(dir), name, path)
		if !ok || key.Network != network {
			continue
		}
		fi, err := fileutil.Lstat(s.fs, path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("sweep %s: %w", path, err))
			continue
		}
		if !fi.ModTime().Before(olderThan) {
			continue
		}
		done, err := s.sweepTemp(key, path)
		if err != nil {
			errs = append(errs, err)
		}
		if done {
			removed = append(removed, path)
		}
	}
	return removed, errors.Join(errs...)
}

// sweepTemp removes key's temp file at path unless key's lock is held.
func (s *DiskStore) sweepTemp(key Key, path string) (bool, error) {
	unlock, err := s.TryLock(key, Holder{PID: os.Getpid(), Verb: "GC", Since: time.Now()})
	if errors.Is(err, ErrLocked) {
		return false, nil // a write may be in progress
	}
	if err != nil {
		return false, fmt.Errorf("sweep %s: %w", path, err)
	}
	defer func() { _ = unlock.Unlock() }() // GC holds nothing else under it
	if _, err := fileutil.RemoveDurable(s.fs, path); err != nil {
		return false, fmt.Errorf("sweep %s: %w", path, err)
	}
	return true, nil
}

// tempKey turns ".<name>.json.tmp" (the TempPath of a record) in network dir
// dir back into its key: from a plain name, or for a hashed one from the
// temp file itself (a complete entry: it is only renamed once synced; one
// that does not decode is left alone, as its key is unknown).
func (s *DiskStore) tempKey(dir, name, path string) (Key, bool) {
	inner, ok := strings.CutPrefix(name, ".")
	if !ok {
		return Key{}, false
	}
	inner, ok = strings.CutSuffix(inner, tmpExt)
	if !ok {
		return Key{}, false
	}
	base, ok := strings.CutSuffix(inner, recordExt)
	if !ok {
		return Key{}, false
	}
	if key, ok := parseKeyName(dir, base); ok {
		return key, true
	}
	if !isHashedName(base) && !strings.HasPrefix(dir, hashedNetwork) {
		return Key{}, false
	}
	key, err := s.keyInFile(path)
	if err != nil || !namesKey(key, dir, base) {
		return Key{}, false
	}
	return key, true
}
