package cache

import (
	"fmt"
	"os"
	"path/filepath"
)

// Prober is an optional Store capability: a health check of the storage,
// for STATUS and catenactl doctor.
type Prober interface {
	// Probe reports why the store could not record an ADD now, if so.
	Probe() error
}

var _ Prober = (*DiskStore)(nil)

// Probe checks that the store's dir is a real directory (not a symlink) in
// which a file can be created, written and removed.
func (s *DiskStore) Probe() error {
	if err := mkdirAllDurable(s.fs, s.dir, dirPerm); err != nil {
		return fmt.Errorf("cache dir %s: %w", s.dir, err)
	}
	fi, err := lstat(s.fs, s.dir)
	if err != nil {
		return fmt.Errorf("cache dir %s: %w", s.dir, err)
	}
	if err := checkDirInfo(fi); err != nil {
		return fmt.Errorf("cache dir %s: %w", s.dir, err)
	}
	tmp, err := tempName(filepath.Join(s.dir, "probe"))
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
