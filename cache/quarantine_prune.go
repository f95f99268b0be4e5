package cache

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/catena-cni/catena/fileutil"
)

// The bounds GC prunes quarantine/ to: a corrupt record is kept for
// inspection for QuarantineMaxAge after it was moved aside, and at most the
// QuarantineMaxCount newest are kept.
const (
	QuarantineMaxAge   = 30 * 24 * time.Hour
	QuarantineMaxCount = 100
)

// QuarantinePruner is an optional Store capability: it bounds what
// Quarantine moved aside, which nothing else ever removes.
type QuarantinePruner interface {
	// PruneQuarantine removes the quarantined records moved aside before
	// now-maxAge, then the oldest beyond the maxCount newest, and returns
	// their paths, oldest first.
	PruneQuarantine(now time.Time, maxAge time.Duration, maxCount int) ([]string, error)
}

var _ QuarantinePruner = (*DiskStore)(nil)

// PruneQuarantine implements QuarantinePruner. It goes by when each record
// was moved aside, which Quarantine writes into its name
// (<name>.<unixnano>[.json]); an entry whose name does not have that form is
// not Catena's and is left alone. Nothing is followed: quarantine/ must be
// a real directory, each entry is looked at with lstat, and only regular
// files are removed and counted (a symlink or directory that was moved
// aside is left for the operator). Pruning goes on past an entry it cannot
// remove and reports them all.
func (s *DiskStore) PruneQuarantine(now time.Time, maxAge time.Duration, maxCount int) ([]string, error) {
	qdir := filepath.Join(s.dir, quarantineDir)
	fi, err := fileutil.Lstat(s.fs, qdir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("prune quarantine: %w", err)
	}
	if err := checkDirInfo(fi); err != nil {
		return nil, fmt.Errorf("prune quarantine: %s %w", qdir, err)
	}
	names, err := readDirNames(s.fs, qdir)
	if err != nil {
		return nil, fmt.Errorf("prune quarantine: %w", err)
	}
	type entry struct {
		path string
		at   int64
	}
	var files []entry
	var errs []error
	for _, name := range names {
		at, ok := quarantineStamp(name)
		if !ok {
			continue
		}
		path := filepath.Join(qdir, name)
		fi, err := fileutil.Lstat(s.fs, path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // pruned meanwhile
		case err != nil:
			errs = append(errs, fmt.Errorf("prune quarantine: %w", err))
			continue
		case !fi.Mode().IsRegular():
			continue
		}
		files = append(files, entry{path, at})
	}
	slices.SortFunc(files, func(a, b entry) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.path, b.path)) })
	cutoff := now.Add(-maxAge).UnixNano()
	var pruned []string
	for i, f := range files {
		if f.at >= cutoff && len(files)-i <= max(maxCount, 0) {
			break // sorted: every later file is young enough and within count
		}
		if err := s.fs.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("prune quarantine: %w", err))
			continue
		}
		pruned = append(pruned, f.path)
	}
	return pruned, errors.Join(errs...)
}

// quarantineStamp returns when a quarantined entry was moved aside, from
// its name <name>.<unixnano> or <name>.<unixnano>.json (see freeName).
func quarantineStamp(name string) (int64, bool) {
	base := strings.TrimSuffix(name, recordExt)
	dot := strings.LastIndexByte(base, '.')
	if dot <= 0 || strings.HasPrefix(name, ".") {
		return 0, false
	}
	digits := base[dot+1:]
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	at, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	return at, true
}
