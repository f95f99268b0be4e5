package cache

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/fileutil"
)

// Mark is the node reconciler's durable note that an attachment was found
// without a sandbox: phase one of its two-phase reclaim. Version is the
// record's version when it was marked; the reclaim goes ahead only if the
// record is still that version.
type Mark struct {
	Key      Key       `json:"key"`
	MarkedAt time.Time `json:"markedAt"`
	Version  string    `json:"version"`
}

// MarkStore keeps the reconciler's marks.
type MarkStore interface {
	// Marks returns every mark. A mark file that cannot be trusted is not
	// returned: it is removed, as if it had never been made.
	Marks() (map[Key]Mark, error)
	// PutMark durably writes m, replacing key's previous mark.
	PutMark(m Mark) error
	// ClearMark durably removes key's mark; a missing mark is not an error.
	ClearMark(key Key) error
}

// DiskMarks is the MarkStore of a cache dir:
//
//	reconcile/<network>/<containerID>:<ifname>.json
//
// Dirs 0700, files 0600, written by a durable replace; a symlink, a
// non-regular file or one open to group or others is never read.
type DiskMarks struct {
	fs  afero.Fs
	dir string
}

var _ MarkStore = (*DiskMarks)(nil)

const (
	marksDir    = "reconcile"
	maxMarkSize = 4 << 10
)

// NewDiskMarks returns the marks of cacheDir on fsys. On the real disk every
// path is reached by the cache's trusted walk (TrustedFs): a symlink or an
// entry another user owns or could write is refused.
func NewDiskMarks(fsys afero.Fs, cacheDir string) *DiskMarks {
	cacheDir = filepath.Clean(cacheDir)
	return &DiskMarks{fs: fileutil.TrustedFs(fsys, cacheDir), dir: filepath.Join(cacheDir, marksDir)}
}

// path names key's mark as its record is named (names.go): long keys and
// networks are hashed, and the mark holds the full key.
func (m *DiskMarks) path(key Key) string {
	return filepath.Join(m.dir, networkDirName(key.Network), keyName(key)+recordExt)
}

// PutMark implements MarkStore.
func (m *DiskMarks) PutMark(mk Mark) error {
	if err := mk.Key.Validate(); err != nil {
		return fmt.Errorf("put mark: %w", err)
	}
	dir := filepath.Dir(m.path(mk.Key))
	if err := m.checkDirs(dir); err != nil {
		return fmt.Errorf("put mark of %s: %w", mk.Key, err)
	}
	if err := fileutil.MkdirAllDurable(m.fs, dir, dirPerm); err != nil {
		return fmt.Errorf("put mark of %s: %w", mk.Key, err)
	}
	data, err := json.Marshal(mk)
	if err != nil {
		return fmt.Errorf("put mark of %s: %w", mk.Key, err)
	}
	if err := fileutil.WriteFileDurable(m.fs, m.path(mk.Key), data); err != nil {
		return fmt.Errorf("put mark of %s: %w", mk.Key, err)
	}
	return nil
}

// checkDirs refuses a symlink or non-directory at reconcile/ or
// reconcile/<network>: a mark is never written through a link.
func (m *DiskMarks) checkDirs(netDir string) error {
	for _, d := range []string{m.dir, netDir} {
		fi, err := fileutil.Lstat(m.fs, d)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := checkDirInfo(fi); err != nil {
			return fmt.Errorf("%s %w", d, err)
		}
	}
	return nil
}

// ClearMark implements MarkStore.
func (m *DiskMarks) ClearMark(key Key) error {
	if err := key.Validate(); err != nil {
		return fmt.Errorf("clear mark: %w", err)
	}
	path := m.path(key)
	if err := m.checkDirs(filepath.Dir(path)); err != nil {
		return fmt.Errorf("clear mark of %s: %w", key, err)
	}
	if _, err := fileutil.Lstat(m.fs, path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := fileutil.RemoveTemp(m.fs, path); err != nil {
		return fmt.Errorf("clear mark of %s: %w", key, err)
	}
	if _, err := fileutil.RemoveDurable(m.fs, path); err != nil {
		return fmt.Errorf("clear mark of %s: %w", key, err)
	}
	return nil
}

// Marks implements MarkStore.
func (m *DiskMarks) Marks() (map[Key]Mark, error) {
	out := map[Key]Mark{}
	fi, err := fileutil.Lstat(m.fs, m.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list marks: %w", err)
	}
	if err := checkDirInfo(fi); err != nil {
		return nil, fmt.Errorf("list marks: %s %w", m.dir, err)
	}
	nets, err := afero.ReadDir(m.fs, m.dir)
	if err != nil {
		return nil, fmt.Errorf("list marks: %w", err)
	}
	for _, n := range nets {
		if checkDirInfo(n) != nil {
			continue
		}
		names, err := readDirNames(m.fs, filepath.Join(m.dir, n.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list marks: %w", err)
		}
		for _, name := range names {
			base, ok := strings.CutSuffix(name, recordExt)
			if !ok {
				continue
			}
			mk, err := m.readName(n.Name(), base)
			if errors.Is(err, errNotAMark) {
				continue
			}
			key := mk.Key
			if err != nil {
				// Untrusted or torn: drop it; the attachment starts
				// phase one again, which only delays a reclaim.
				if cerr := m.ClearMark(key); cerr != nil {
					return nil, fmt.Errorf("list marks: %w (clearing it: %w)", err, cerr)
				}
				continue
			}
			out[key] = mk
		}
	}
	return out, nil
}

// errNotAMark: a file of the marks dir whose name is no key's.
var errNotAMark = errors.New("not the name of a mark")

// readName loads the mark named base in network dir dir. A plain name is
// parsed; a hashed one is read and must hold a key that hashes to it. The
// returned Mark carries the key even with an error, so that the caller can
// clear it.
func (m *DiskMarks) readName(dir, base string) (Mark, error) {
	if key, ok := parseKeyName(dir, base); ok {
		mk, err := m.read(key)
		mk.Key = key
		return mk, err
	}
	if !isHashedName(base) && !strings.HasPrefix(dir, hashedNetwork) {
		return Mark{}, errNotAMark
	}
	mk, err := m.readPath(filepath.Join(m.dir, dir, base+recordExt))
	if err != nil || !namesKey(mk.Key, dir, base) {
		return Mark{}, errNotAMark // cannot be cleared by key: left alone
	}
	return mk, nil
}

// read loads key's mark, never through a symlink.
func (m *DiskMarks) read(key Key) (Mark, error) {
	mk, err := m.readPath(m.path(key))
	if err != nil {
		return Mark{}, err
	}
	if mk.Key != key {
		return Mark{}, fmt.Errorf("read mark %s: it names %s", m.path(key), mk.Key)
	}
	return mk, nil
}

// readPath loads the mark at path, never through a symlink.
func (m *DiskMarks) readPath(path string) (Mark, error) {
	data, err := readBounded(m.fs, path, maxMarkSize)
	if err != nil {
		return Mark{}, fmt.Errorf("read mark %s: %w", path, err)
	}
	var mk Mark
	if err := json.Unmarshal(data, &mk); err != nil {
		return Mark{}, fmt.Errorf("read mark %s: %w", path, err)
	}
	return mk, nil
}
