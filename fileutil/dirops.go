package fileutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/afero"
)

// RemoveDurable removes path and makes the removal durable; it reports
// whether there was an entry to remove. A missing path is not an error,
// but the parent is still synced: a previous removal may have been
// interrupted between the unlink and the directory fsync. A missing
// parent is not an error either.
func RemoveDurable(fsys afero.Fs, path string) (bool, error) {
	err := fsys.Remove(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("remove %s: %w", path, err)
	}
	removed := err == nil
	err = SyncDir(fsys, filepath.Dir(path))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return removed, fmt.Errorf("remove %s: %w", path, err)
	}
	return removed, nil
}

// RenameDurable renames oldpath to newpath (the entry itself: a symlink is
// not followed) and syncs both parents.
func RenameDurable(fsys afero.Fs, oldpath, newpath string) error {
	if err := fsys.Rename(oldpath, newpath); err != nil {
		return fmt.Errorf("rename %s to %s: %w", oldpath, newpath, err)
	}
	if err := SyncDir(fsys, filepath.Dir(newpath)); err != nil {
		return fmt.Errorf("rename %s to %s: %w", oldpath, newpath, err)
	}
	if filepath.Dir(oldpath) != filepath.Dir(newpath) {
		if err := SyncDir(fsys, filepath.Dir(oldpath)); err != nil {
			return fmt.Errorf("rename %s to %s: %w", oldpath, newpath, err)
		}
	}
	return nil
}

// MkdirAllDurable is MkdirAll that fsyncs the parent of every directory it
// creates, so that the new entries survive a crash. An existing directory
// costs one stat.
func MkdirAllDurable(fsys afero.Fs, path string, perm os.FileMode) error {
	path = filepath.Clean(path)
	fi, err := fsys.Stat(path)
	if err == nil {
		if fi.IsDir() {
			return nil
		}
		return fmt.Errorf("mkdir %s: exists and is not a directory", path)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("mkdir %s: %w", path, err)
	}
	parent := filepath.Dir(path)
	if parent != path {
		if err := MkdirAllDurable(fsys, parent, perm); err != nil {
			return err
		}
	}
	if err := fsys.Mkdir(path, perm); err != nil {
		// Lost a race with another creator: fine if it made a directory.
		// Sync anyway, as its own sync may not have happened yet.
		fi, serr := fsys.Stat(path)
		if !errors.Is(err, fs.ErrExist) || serr != nil || !fi.IsDir() {
			return fmt.Errorf("mkdir %s: %w", path, err)
		}
	}
	if err := SyncDir(fsys, parent); err != nil {
		return fmt.Errorf("mkdir %s: %w", path, err)
	}
	return nil
}
