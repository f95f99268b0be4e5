package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/afero"
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
	src := s.recordPath(key)
	name := key.Network + "_" + key.ContainerID + ":" + key.IfName
	ext := recordExt
	if _, err := s.checkNetworkDir(key); errors.Is(err, ErrCorrupt) {
		src = s.networkDir(key.Network)
		name, ext = key.Network, ""
	}
	if _, err := lstat(s.fs, src); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
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
	if err := renameDurable(s.fs, src, dst); err != nil {
		return "", fmt.Errorf("quarantine record %s: %w", key, err)
	}
	return dst, nil
}

func (s *DiskStore) ensureQuarantineDir(qdir string) error {
	fi, err := lstat(s.fs, qdir)
	if errors.Is(err, fs.ErrNotExist) {
		return mkdirAllDurable(s.fs, qdir, dirPerm)
	}
	if err != nil {
		return err
	}
	if err := checkDirInfo(fi); err != nil {
		return fmt.Errorf("quarantine dir %s %v", qdir, err)
	}
	return nil
}

// freeName returns dir/<name>.<unixnano><ext> that does not exist yet.
func freeName(fsys afero.Fs, dir, name, ext string) (string, error) {
	now := time.Now().UnixNano()
	for i := int64(0); i < 1000; i++ {
		p := filepath.Join(dir, name+"."+strconv.FormatInt(now+i, 10)+ext)
		if _, err := lstat(fsys, p); errors.Is(err, fs.ErrNotExist) {
			return p, nil
		} else if err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("no free name for %s in %s", name, dir)
}

// List returns the keys of all records. Entries that are temp files, or
// whose names do not parse or validate, are skipped; a record that exists but
// is corrupt (a symlink, a directory...) is listed, so that Load reports it
// and it can be quarantined. Network entries that are not real directories
// are not followed.
func (s *DiskStore) List() ([]Key, error) {
	root := filepath.Join(s.dir, recordsDir)
	nets, err := afero.ReadDir(s.fs, root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list records: %w", err)
	}
	var keys []Key
	for _, n := range nets {
		if checkDirInfo(n) != nil {
			continue
		}
		names, err := readDirNames(s.fs, filepath.Join(root, n.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("list records: %w", err)
		}
		for _, name := range names {
			if key, ok := parseRecordName(n.Name(), name); ok {
				keys = append(keys, key)
			}
		}
	}
	return keys, nil
}

// parseRecordName turns records/<network>/<containerID>:<ifname>.json back
// into its key.
func parseRecordName(network, name string) (Key, bool) {
	if strings.HasSuffix(name, tmpExt) {
		return Key{}, false
	}
	base, ok := strings.CutSuffix(name, recordExt)
	if !ok {
		return Key{}, false
	}
	cid, ifname, ok := strings.Cut(base, ":")
	if !ok {
		return Key{}, false
	}
	key := Key{Network: network, ContainerID: cid, IfName: ifname}
	if key.Validate() != nil {
		return Key{}, false
	}
	return key, true
}

func readDirNames(fsys afero.Fs, dir string) ([]string, error) {
	d, err := fsys.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}
