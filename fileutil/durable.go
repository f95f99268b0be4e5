package fileutil

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/afero"
)

// Durability primitives, in the style of etcd's client/pkg/fileutil but on
// afero so that their users can be tested on an in-memory filesystem.
//
// The record store creates records and compacts their files with
// WriteFileDurable; the measurement that chose append-with-fdatasync for
// its other writes is in cache/recordfile.go.

// The modes of the private files and directories Catena creates, and the
// extension of every temp file of a durable or atomic write.
const (
	DirPerm  = 0o700
	FilePerm = 0o600
	TempExt  = ".tmp"
)

// WriteFileDurable atomically and durably replaces path with data, a
// private file (FilePerm): when it returns nil the new content survives a
// crash or power loss, and at no instant can a reader see a partial file.
// The temp file is created in the same directory so that the rename never
// crosses a filesystem.
//
// The temp file's name is fixed per path (TempPath): the caller holds a
// lock on path (the record store writes a record only under the
// attachment's lock), so there is never a second writer, and the leftover
// of a crash is found by name (RemoveTemp) rather than by listing a
// directory that may hold 10,000 records. The temp is created O_EXCL, so a
// symlink planted at the temp name is never followed: a leftover is
// unlinked and the create retried once.
func WriteFileDurable(fsys afero.Fs, path string, data []byte) error {
	_, err := WriteFileDurableInfo(fsys, path, data)
	return err
}

// WriteFileDurableInfo is WriteFileDurable that also returns what fstat
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
	return replaceWith(fsys, f, tmp, path, bytes.NewReader(data), int64(len(data)))
}

// replaceWith copies the size bytes of src into the new temp file f at
// tmp, fsyncs it, renames it over path and fsyncs the directory; on
// failure the temp is removed.
func replaceWith(fsys afero.Fs, f afero.File, tmp, path string, src io.Reader, size int64) (fi os.FileInfo, err error) {
	dir := filepath.Dir(path)
	renamed := false
	defer func() {
		if err != nil && !renamed {
			_ = f.Close() // may already be closed; the error is moot then
			_ = fsys.Remove(tmp)
		}
	}()
	n, err := io.Copy(f, src)
	if err == nil && n != size {
		err = fmt.Errorf("%d bytes of %d: the source changed meanwhile", n, size)
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

// TempPath is the hidden temp file next to path that WriteFileDurable
// renames over it: ".<name>.tmp".
func TempPath(path string) string {
	dir, base := filepath.Split(path)
	return filepath.Join(dir, "."+base+TempExt)
}

// RemoveTemp unlinks the temp file of path that a crash in the middle of
// WriteFileDurable left behind, if there is one. It does not sync the
// directory: the caller's next durable step does.
func RemoveTemp(fsys afero.Fs, path string) error {
	tmp := TempPath(path)
	if err := fsys.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale temp file %s: %w", tmp, err)
	}
	return nil
}
