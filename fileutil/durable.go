package fileutil

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/afero"
)

// Durability primitives, in the style of etcd's client/pkg/fileutil but on
// afero so that the store can be tested on an in-memory filesystem.
//
// writeFileDurable creates records and compacts their files; the
// measurement that chose append-with-fdatasync for the other writes is in
// recordfile.go.

const (
	DirPerm  = 0o700
	FilePerm = 0o600
	TempExt  = ".tmp"
)

// writeFileDurable atomically and durably replaces path with data: when it
// returns nil the new content survives a crash or power loss, and at no
// instant can a reader see a partial file. The temp file is created in the
// same directory so that the rename never crosses a filesystem.
//
// The temp file's name is fixed per path (tempPath): record writes happen
// only under the attachment's lock, so there is never a second writer, and
// the leftover of a crash is found by name (Remove unlinks it) rather than
// by listing a directory that may hold 10,000 records. The temp is created
// O_EXCL, so a symlink planted at the temp name is never followed: a
// leftover is unlinked and the create retried once.
func WriteFileDurable(fsys afero.Fs, path string, data []byte) error {
	_, err := WriteFileDurableInfo(fsys, path, data)
	return err
}

// writeFileDurableInfo is writeFileDurable that also returns what fstat
// said of the new file once its data was synced (the rename keeps it).
func WriteFileDurableInfo(fsys afero.Fs, path string, data []byte) (os.FileInfo, error) {
	tmp := TempPath(path)
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, FilePerm)
	if errors.Is(err, fs.ErrExist) {
		if err := RemoveTemp(fsys, path); err != nil {
			return nil, err
		}
		f, err = fsys.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, FilePerm)
	}
	if err != nil {
		return nil, fmt.Errorf("create temp file for %s: %w", path, err)
	}
	return replaceWith(fsys, f, tmp, path, data)
}

// writeFileAtomic is writeFileDurable for writers that hold no lock: its
// temp file has a unique name (tempName), so two writers of the same path
// never write into each other's temp; the last rename wins whole.
func WriteFileAtomic(fsys afero.Fs, path string, data []byte) error {
	tmp, err := TempName(path)
	if err != nil {
		return err
	}
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, FilePerm)
	if err != nil {
		return fmt.Errorf("create temp file for %s: %w", path, err)
	}
	_, err = replaceWith(fsys, f, tmp, path, data)
	return err
}

// replaceWith writes data to the new temp file f at tmp, fsyncs it, renames
// it over path and fsyncs the directory; on failure the temp is removed.
func replaceWith(fsys afero.Fs, f afero.File, tmp, path string, data []byte) (fi os.FileInfo, err error) {
	dir := filepath.Dir(path)
	renamed := false
	defer func() {
		if err != nil && !renamed {
			_ = f.Close() // may already be closed; the error is moot then
			_ = fsys.Remove(tmp)
		}
	}()
	n, err := f.Write(data)
	if err == nil && n != len(data) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", tmp, err)
	}
	if err = SyncFile(f, false); err != nil {
		return nil, fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if fi, err = f.Stat(); err != nil {
		return nil, fmt.Errorf("stat %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return nil, fmt.Errorf("close %s: %w", tmp, err)
	}
	if err = fsys.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("rename %s to %s: %w", tmp, path, err)
	}
	renamed = true
	if err = SyncDir(fsys, dir); err != nil {
		return nil, fmt.Errorf("replace %s: %w", path, err)
	}
	return fi, nil
}

// tempPath is the hidden temp file next to path that writeFileDurable
// renames over it: ".<name>.tmp".
func TempPath(path string) string {
	dir, base := filepath.Split(path)
	return filepath.Join(dir, "."+base+TempExt)
}

// removeTemp unlinks the temp file of path that a crash in the middle of
// writeFileDurable left behind, if there is one. It does not sync the
// directory: the caller's next durable step does.
func RemoveTemp(fsys afero.Fs, path string) error {
	tmp := TempPath(path)
	if err := fsys.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale temp file %s: %w", tmp, err)
	}
	return nil
}

// tempName returns a unique hidden name next to path, ending in ".tmp", for
// writers that hold no lock (the writability probe).
func TempName(path string) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("temp name for %s: %w", path, err)
	}
	dir, base := filepath.Split(path)
	return filepath.Join(dir, "."+base+"."+hex.EncodeToString(b[:])+TempExt), nil
}

// removeDurable removes path and makes the removal durable. A missing path is
// not an error, but the parent is still synced: a previous removal may have
// been interrupted between the unlink and the directory fsync.
func RemoveDurable(fsys afero.Fs, path string) error {
	if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	err := SyncDir(fsys, filepath.Dir(path))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

// renameDurable renames oldpath to newpath (the entry itself: a symlink is
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

// mkdirAllDurable is MkdirAll that fsyncs the parent of every directory it
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

// SyncDir fsyncs a directory so that a create, rename or unlink in it is
// durable (also used by nodeconf for the CNI conf and bin dirs).
func SyncDir(fsys afero.Fs, dir string) error {
	d, err := fsys.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir %s: %w", dir, err)
	}
	if err := SyncFile(d, false); err != nil {
		_ = d.Close()
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	if err := d.Close(); err != nil {
		return fmt.Errorf("close dir %s: %w", dir, err)
	}
	return nil
}
