package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/fileutil"
)

// Prober is an optional Store capability: a health check of the storage,
// for STATUS and catenactl doctor.
type Prober interface {
	// Probe reports why the store could not record an ADD now, if so.
	Probe() error
}

var _ Prober = (*DiskStore)(nil)

// Probe checks that the store's dir is a real directory (not a symlink)
// that only Catena's user can write, in which a file can be created,
// written and removed, and that nothing in it is untrusted (Audit).
func (s *DiskStore) Probe() error {
	fi, err := fileutil.Lstat(s.fs, s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := fileutil.MkdirAllDurable(s.fs, s.dir, dirPerm); err != nil {
			return fmt.Errorf("cache dir %s: %w", s.dir, err)
		}
		fi, err = fileutil.Lstat(s.fs, s.dir)
	}
	if err != nil {
		return fmt.Errorf("cache dir %s: %w", s.dir, err)
	}
	if err := fileutil.CheckTrustedDir(s.dir, fi); err != nil {
		return fmt.Errorf("cache dir %s: %w", s.dir, err)
	}
	if err := s.Audit(); err != nil {
		return err
	}
	tmp, err := fileutil.TempName(filepath.Join(s.dir, "probe"))
	if err != nil {
		return err
	}
	f, err := s.fs.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, filePerm)
	if err != nil {
		return fmt.Errorf("cache dir %s is not writable: %w", s.dir, err)
	}
	_, werr := f.Write([]byte("probe\n"))
	cerr := f.Close()
	rerr := s.fs.Remove(tmp)
	for _, err := range []error{werr, cerr, rerr} {
		if err != nil {
			return fmt.Errorf("cache dir %s is not writable: %w", s.dir, err)
		}
	}
	return nil
}

// keyedDirs are the trees of the cache dir that hold one dir per network
// and one entry per attachment: records/, the FlockLocker's locks/ and
// pending/.
var keyedDirs = []string{recordsDir, LocksDir, pendingDir}

// Audit returns the first entry of the cache dir that Catena would refuse
// to act on (an *UntrustedError): a directory at the top two levels that
// another user owns or could write, or that is a symlink where a network
// dir must be, or a record, lock file or pending marker owned by another
// user. Entries inside quarantine/ are not looked at: they are kept
// aside, never acted on. It costs one lstat per entry.
func (s *DiskStore) Audit() error {
	top, err := afero.ReadDir(s.fs, s.dir)
	if err != nil {
		return fmt.Errorf("cache dir %s: %w", s.dir, err)
	}
	for _, fi := range top {
		path := filepath.Join(s.dir, fi.Name())
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fileutil.CheckTrustedDir(path, fi)
		}
		if !fi.IsDir() {
			if err := fileutil.CheckOwned(path, fi); err != nil {
				return err
			}
			continue
		}
		if err := s.auditDir(path, fi, slices.Contains(keyedDirs, fi.Name()) || fi.Name() == "events"); err != nil {
			return err
		}
	}
	return nil
}

// auditDir checks the directory path and, unless it is quarantine/, its
// entries: sub-directories (network dirs) and the files in them.
func (s *DiskStore) auditDir(path string, fi os.FileInfo, deep bool) error {
	if err := fileutil.CheckTrustedDir(path, fi); err != nil {
		return err
	}
	if !deep {
		return nil
	}
	entries, err := afero.ReadDir(s.fs, path)
	if err != nil {
		return fmt.Errorf("cache dir %s: %w", path, err)
	}
	for _, e := range entries {
		p := filepath.Join(path, e.Name())
		if e.Mode()&fs.ModeSymlink != 0 || e.IsDir() {
			if err := s.auditDir(p, e, false); err != nil {
				return err
			}
			if err := s.auditFiles(p); err != nil {
				return err
			}
			continue
		}
		if err := fileutil.CheckOwned(p, e); err != nil {
			return err
		}
	}
	return nil
}

// auditFiles checks the owner of every entry of a network dir.
func (s *DiskStore) auditFiles(dir string) error {
	entries, err := afero.ReadDir(s.fs, dir)
	if err != nil {
		return fmt.Errorf("cache dir %s: %w", dir, err)
	}
	for _, e := range entries {
		if err := fileutil.CheckOwned(filepath.Join(dir, e.Name()), e); err != nil {
			return err
		}
	}
	return nil
}
