package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/fileutil"
)

// BinaryID identifies a plugin binary as it was found: its absolute path
// and what stat says of the file there. A VERSION answer is cached under
// it and is valid only while every field is unchanged: a binary replaced,
// rewritten, touched or moved is asked again.
type BinaryID struct {
	Path    string `json:"path"`
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	MtimeNs int64  `json:"mtimeNs"`
}

// BinaryIDOf is the identity of the binary at path that stat described as
// fi. A filesystem with no device and inode (MemMapFs) gives 0 for both.
func BinaryIDOf(path string, fi os.FileInfo) BinaryID {
	id := BinaryID{Path: path, Size: fi.Size(), MtimeNs: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.Dev, id.Ino = uint64(st.Dev), st.Ino //nolint:unconvert // Dev is not uint64 on every platform
	}
	return id
}

// VersionCache keeps the answers of plugin binaries to VERSION, one small
// file per binary path under <cacheDir>/versions/, so that a delegate whose
// cniVersion is "auto" costs one VERSION per binary, not one per call:
// Catena is a process per CNI call, so only the disk outlives a call.
// Files are 0600 in a 0700 dir, replaced atomically (a unique temp, fsync,
// rename), read bounded and never through a symlink. An entry whose
// identity differs from the binary's now is a miss.
type VersionCache struct {
	fs  afero.Fs
	dir string
}

const (
	versionsDir    = "versions"
	maxVersionSize = 4 << 10
)

// versionEntry is one cache file.
type versionEntry struct {
	Binary            BinaryID `json:"binary"`
	SupportedVersions []string `json:"supportedVersions"`
}

// NewVersionCache returns the VERSION cache of cacheDir on fsys, reached,
// on the real disk, by the cache's trusted walk (TrustedFs).
func NewVersionCache(fsys afero.Fs, cacheDir string) *VersionCache {
	cacheDir = filepath.Clean(cacheDir)
	return &VersionCache{fs: fileutil.TrustedFs(fsys, cacheDir), dir: filepath.Join(cacheDir, versionsDir)}
}

// path is the cache file of the binary at binPath: a hash of the path, so
// that any path fits in a file name.
func (c *VersionCache) path(binPath string) string {
	sum := sha256.Sum256([]byte(binPath))
	return filepath.Join(c.dir, hex.EncodeToString(sum[:16])+".json")
}

// Get returns the supported versions cached for id, and whether there was
// an entry of exactly that identity. A missing entry, or one of another
// identity, is a miss with no error; one that cannot be read or decoded is
// a miss with the error, for the caller to log before it asks again.
func (c *VersionCache) Get(id BinaryID) ([]string, bool, error) {
	p := c.path(id.Path)
	data, err := readBounded(c.fs, p, maxVersionSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read version cache %s of %s: %w", p, id.Path, err)
	}
	var e versionEntry
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, false, fmt.Errorf("read version cache %s of %s: %w", p, id.Path, err)
	}
	if e.Binary != id || len(e.SupportedVersions) == 0 {
		return nil, false, nil
	}
	return e.SupportedVersions, true, nil
}

// Put caches versions as id's answer, replacing the entry of its path.
func (c *VersionCache) Put(id BinaryID, versions []string) error {
	data, err := json.Marshal(versionEntry{Binary: id, SupportedVersions: versions})
	if err != nil {
		return fmt.Errorf("version cache of %s: %w", id.Path, err)
	}
	if len(data) > maxVersionSize {
		return fmt.Errorf("version cache of %s: %d bytes, at most %d", id.Path, len(data), maxVersionSize)
	}
	if err := fileutil.MkdirAllDurable(c.fs, c.dir, dirPerm); err != nil {
		return fmt.Errorf("version cache of %s: %w", id.Path, err)
	}
	if err := fileutil.WriteFileAtomic(c.fs, c.path(id.Path), data, filePerm); err != nil {
		return fmt.Errorf("version cache of %s: %w", id.Path, err)
	}
	return nil
}

// Forget removes the entry of the binary at binPath, if any: its answer
// proved wrong, so the next call asks again.
func (c *VersionCache) Forget(binPath string) error {
	if _, err := fileutil.RemoveDurable(c.fs, c.path(binPath)); err != nil {
		return fmt.Errorf("version cache of %s: %w", binPath, err)
	}
	return nil
}
