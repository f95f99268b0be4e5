package main

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain"
)

// entry is one record of the cache dir, or why it could not be read.
type entry struct {
	Key cache.Key
	Rec *cache.Record
	Err error
	// Note is the record's pending-teardown note (when its teardown is
	// next retried), if it has one.
	Note *cache.PendingNote
}

// loadEntries reads every record of cacheDir, sorted by network, container
// and ifname. A record that cannot be read is an entry with Err set, so
// that one bad file never hides the others.
func loadEntries(cacheDir string) ([]entry, error) {
	s := store(cacheDir)
	keys, err := s.List()
	if err != nil {
		return nil, fmt.Errorf("listing the records of %s: %w", cacheDir, err)
	}
	slices.SortFunc(keys, compareKeys)
	entries := make([]entry, 0, len(keys))
	for _, k := range keys {
		rec, err := s.Load(k)
		e := entry{Key: k, Rec: rec, Err: err}
		if note, ok, _ := s.PendingNoteOf(k); ok {
			e.Note = &note
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// checkRecordsDir fails, naming the path, if the records of network cannot
// be listed as catena keeps them: records/ or records/<network> is a
// symlink or not a directory, or cannot be looked at. The store's List
// skips a network dir that it cannot trust, so without this check gc and
// repair would report that there was nothing to do. A dir that does not
// exist yet holds no records.
func checkRecordsDir(cacheDir, network string) error {
	netDir := filepath.Dir(store(cacheDir).Path(cache.Key{Network: network, ContainerID: "x", IfName: "x"}))
	for _, p := range []string{filepath.Dir(netDir), netDir} {
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return fmt.Errorf("cannot list the records of network %q: %w", network, err)
		case fi.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("cannot list the records of network %q: %s is a symlink; catena never follows one in its cache dir: move it aside", network, p)
		case !fi.IsDir():
			return fmt.Errorf("cannot list the records of network %q: %s is not a directory (%s): move it aside", network, p, fi.Mode())
		}
	}
	return nil
}

// cacheEntries reads every record of the cache dir that --cache-dir or the
// config names, and returns that dir too.
func (a *app) cacheEntries() (string, []entry, error) {
	cacheDir, err := a.resolveCacheDir()
	if err != nil {
		return "", nil, err
	}
	entries, err := loadEntries(cacheDir)
	return cacheDir, entries, err
}

func compareKeys(a, b cache.Key) int {
	return cmp.Or(cmp.Compare(a.Network, b.Network), cmp.Compare(a.ContainerID, b.ContainerID), cmp.Compare(a.IfName, b.IfName))
}

// sortReport orders the keys of a GC or repair report, for stable output.
func sortReport(keys [][]cache.Key, skips []libchain.GCSkip, failed []libchain.RepairFailure) {
	for _, ks := range keys {
		slices.SortFunc(ks, compareKeys)
	}
	slices.SortFunc(skips, func(a, b libchain.GCSkip) int { return compareKeys(a.Key, b.Key) })
	slices.SortFunc(failed, func(a, b libchain.RepairFailure) int { return compareKeys(a.Key, b.Key) })
}

// delegateStates renders the steps of a record as "bridge:added
// portmap:del-failed".
func delegateStates(rec *cache.Record) string {
	parts := make([]string, len(rec.Steps))
	for i, s := range rec.Steps {
		parts[i] = s.Type + ":" + string(s.State)
	}
	return strings.Join(parts, " ")
}

// heldSteps names the steps that still hold resources, with their last DEL
// error: "delegate 1 (portmap) del-failed: <error>".
func heldSteps(rec *cache.Record) []string {
	var out []string
	for _, s := range rec.Steps {
		if !s.Held() {
			continue
		}
		msg := fmt.Sprintf("delegate %d (%s) %s", s.Index, s.Type, s.State)
		if s.DelError != "" {
			msg += ": " + s.DelError
		}
		out = append(out, msg)
	}
	return out
}
