package nodeconf

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/fileutil"
)

// staleTempAge is how old a temp file of Catena's names must be before it
// is swept: a live writer copies a binary (at most maxBinarySize) in
// seconds, and never keeps a temp file between passes.
const staleTempAge = 2 * time.Minute

// tempName matches the temp names of fileutil's atomic writes
// (fileutil.TempName): ".<name>.<16 hex>.tmp".
var tempName = regexp.MustCompile(`^\.(.+)\.[0-9a-f]{16}\.tmp$`)

// SweepTemp removes the temp files an agent killed mid-write left (a
// partial 0755 binary of tens of MB each time) from the conf dir and the
// bin dir: only names of Catena's own files in the temp pattern, regular
// files (not symlinks), owned by this process's user, unchanged for
// staleTempAge. It returns the paths removed; a file it cannot remove is
// an error, the others are still tried.
func (i *Installer) SweepTemp() ([]string, error) {
	now := time.Now
	if i.Now != nil {
		now = i.Now
	}
	removed, err := sweepDir(i.Fs, i.Cfg.ConfDir, []string{i.Cfg.ConfName}, now())
	if i.Cfg.BinDir != "" {
		r, berr := sweepDir(i.Fs, i.Cfg.BinDir, Binaries, now())
		removed, err = append(removed, r...), errors.Join(err, berr)
	}
	for _, p := range removed {
		i.Log.Info("removed a stale temp file (a write killed midway)", "file", p)
	}
	return removed, err
}

func sweepDir(fsys afero.Fs, dir string, names []string, now time.Time) ([]string, error) {
	entries, err := afero.ReadDir(fsys, dir) // lstat-based: a symlink is not regular
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s for stale temp files: %w", dir, err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		m := tempName.FindStringSubmatch(e.Name())
		if m == nil || !slices.Contains(names, m[1]) || !e.Mode().IsRegular() || !ownedByUs(e) || now.Sub(e.ModTime()) < staleTempAge {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if _, err := fileutil.RemoveDurable(fsys, p); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}

// ownedByUs: the file's owner is this process's effective user. A file
// system that says nothing of owners (a MemMapFs) owns nothing of ours.
func ownedByUs(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}
