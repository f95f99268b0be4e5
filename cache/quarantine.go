package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/fileutil"
)

// Quarantine durably moves key's record into quarantine/ and returns its new
// path; a missing record returns "" and no error. The entry itself is moved,
// whatever it is (a symlink is not followed, a directory goes whole).
//
// If records/<network> is itself a symlink or not a directory, no record of
// that network can be trusted, and that entry is what gets quarantined
// (as quarantine/<network>.<unixnano>); afterwards every key of the network
// loads as ErrNotFound.
func (s *DiskStore) Quarantine(key Key) (string, error) {
	if err := key.Validate(); err != nil {
		return "", fmt.Errorf("quarantine record: %w", err)
	}
	s.memo.forget(key)
	src := s.recordPath(key)
	name, ext := quarantineName(key), recordExt
	if _, err := s.checkNetworkDir(key); errors.Is(err, ErrCorrupt) {
		src = s.networkDir(key.Network)
		name, ext = quarantineDirName(key.Network), ""
	} else if err != nil {
		return "", fmt.Errorf("quarantine record %s: %w", key, err)
	}
	fi, err := fileutil.Lstat(s.fs, src)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		return "", fmt.Errorf("quarantine record %s: %w", key, err)
	}
	if err := fileutil.CheckOwned(src, fi); err != nil {
		return "", fmt.Errorf("quarantine record %s: %w", key, err)
	}
	qdir := filepath.Join(s.dir, quarantineDir)
	if err := s.ensureQuarantineDir(qdir); err != nil {
		return "", fmt.Errorf("quarantine record %s: %w", key, err)
	}
	dst, err := freeName(s.fs, qdir, name, ext)
	if err != nil {
		return "", fmt.Errorf("quarantine record %s: %w", key, err)
	}
	if err := fileutil.RenameDurable(s.fs, src, dst); err != nil {
		return "", fmt.Errorf("quarantine record %s: %w", key, err)
	}
	return dst, nil
}

func (s *DiskStore) ensureQuarantineDir(qdir string) error {
	fi, err := fileutil.Lstat(s.fs, qdir)
	if errors.Is(err, fs.ErrNotExist) {
		return fileutil.MkdirAllDurable(s.fs, qdir, dirPerm)
	}
	if err != nil {
		return err
	}
	return fileutil.CheckTrustedDir(qdir, fi)
}

// freeName returns dir/<name>.<unixnano><ext> that does not exist yet.
func freeName(fsys afero.Fs, dir, name, ext string) (string, error) {
	now := time.Now().UnixNano()
	for i := int64(0); i < 1000; i++ {
		p := filepath.Join(dir, name+"."+strconv.FormatInt(now+i, 10)+ext)
		if _, err := fileutil.Lstat(fsys, p); errors.Is(err, fs.ErrNotExist) {
			return p, nil
		} else if err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("no free name for %s in %s", name, dir)
}
