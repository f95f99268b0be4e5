package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/fileutil"
)

// List returns the keys of all records. Entries that are temp files, or
// whose names do not parse or validate, are skipped; a record that exists but
// is corrupt (a symlink, a directory...) is listed, so that Load reports it
// and it can be quarantined. A record with a hashed name (names.go) is
// listed by the key inside it, if it loads and hashes back to its name.
// Network entries that are not real directories are not followed; one that
// another user owns or could write fails the listing (*UntrustedError).
func (s *DiskStore) List() ([]Key, error) {
	root := filepath.Join(s.dir, recordsDir)
	fi, err := fileutil.Lstat(s.fs, root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err == nil {
		err = fileutil.CheckTrustedDir(root, fi)
	}
	if err != nil {
		return nil, fmt.Errorf("list records: %w", err)
	}
	nets, err := afero.ReadDir(s.fs, root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list records: %w", err)
	}
	var keys []Key
	for _, n := range nets {
		dir := filepath.Join(root, n.Name())
		if err := fileutil.CheckOwned(dir, n); err != nil {
			return nil, fmt.Errorf("list records: %w", err)
		}
		if checkDirInfo(n) != nil {
			continue
		}
		if err := fileutil.CheckTrustedDir(dir, n); err != nil {
			return nil, fmt.Errorf("list records: %w", err)
		}
		names, err := readDirNames(s.fs, dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("list records: %w", err)
		}
		for _, name := range names {
			if key, ok := s.recordKey(n.Name(), name); ok {
				keys = append(keys, key)
			}
		}
	}
	return keys, nil
}

// recordKey turns records/<dir>/<name> back into its key: from the name,
// or for a hashed name or network dir from the record itself.
func (s *DiskStore) recordKey(dir, name string) (Key, bool) {
	if strings.HasSuffix(name, tmpExt) {
		return Key{}, false
	}
	base, ok := strings.CutSuffix(name, recordExt)
	if !ok {
		return Key{}, false
	}
	return s.keyOfName(dir, base)
}

// keyOfName returns the key whose files are named base in network dir
// dir: parsed from a plain name, else read from its record (which must
// exist, load, and hash back to base).
func (s *DiskStore) keyOfName(dir, base string) (Key, bool) {
	if key, ok := parseKeyName(dir, base); ok {
		return key, true
	}
	if !isHashedName(base) && !strings.HasPrefix(dir, hashedNetwork) {
		return Key{}, false
	}
	key, err := s.keyInFile(filepath.Join(s.dir, recordsDir, dir, base+recordExt))
	if err != nil || !namesKey(key, dir, base) {
		return Key{}, false
	}
	return key, true
}

// keyInFile returns the key of the newest entry of the record file (or
// record temp file) at path, with Load's checks.
func (s *DiskStore) keyInFile(path string) (Key, error) {
	fi, err := fileutil.Lstat(s.fs, path)
	if err != nil {
		return Key{}, err
	}
	if err := checkRecordEntry(path, fi); err != nil {
		return Key{}, err
	}
	data, err := s.readRecord(path, path)
	if err != nil {
		return Key{}, err
	}
	rec, err := decodeRecordFile(data)
	if err != nil {
		return Key{}, err
	}
	return rec.Key, nil
}

func readDirNames(fsys afero.Fs, dir string) ([]string, error) {
	d, err := fsys.Open(dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = d.Close() }()
	return d.Readdirnames(-1)
}
