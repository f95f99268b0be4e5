package cache

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/fileutil"
)

// The modes of what the store creates and the extension of its temp
// files: fileutil's, whose durable writes create them.
const (
	dirPerm  = fileutil.DirPerm
	filePerm = fileutil.FilePerm
	tmpExt   = fileutil.TempExt
)

// checkRecordEntry refuses a record owned by another user
// (*UntrustedError) and, wrapping ErrCorrupt, anything checkRecordInfo
// refuses.
func checkRecordEntry(path string, fi os.FileInfo) error {
	if err := fileutil.CheckOwned(path, fi); err != nil {
		return err
	}
	if err := checkRecordInfo(fi); err != nil {
		return fmt.Errorf("%w: %s %w", ErrCorrupt, path, err)
	}
	return nil
}

// checkRecordInfo refuses anything but a private regular file of sane size.
func checkRecordInfo(fi os.FileInfo) error {
	mode := fi.Mode()
	switch {
	case mode&fs.ModeSymlink != 0:
		return errors.New("is a symlink")
	case mode.IsDir():
		return errors.New("is a directory")
	case !mode.IsRegular():
		return fmt.Errorf("is not a regular file (%s)", mode.Type())
	case mode.Perm()&0o077 != 0:
		return fmt.Errorf("untrusted mode %#o", mode.Perm())
	case fi.Size() > maxRecordSize:
		return fmt.Errorf("too large (%d bytes)", fi.Size())
	}
	return nil
}

// checkDirInfo refuses a symlink or non-directory where a directory of the
// store must be.
func checkDirInfo(fi os.FileInfo) error {
	mode := fi.Mode()
	switch {
	case mode&fs.ModeSymlink != 0:
		return errors.New("is a symlink")
	case !mode.IsDir():
		return fmt.Errorf("is not a directory (%s)", mode.Type())
	}
	return nil
}

// readBounded reads the small cache file at path, never through a symlink:
// a non-regular file, one open to group or others, or one over max bytes is
// refused.
func readBounded(fsys afero.Fs, path string, max int) ([]byte, error) {
	f, err := fileutil.OpenReadNoFollow(fsys, path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkRecordInfo(fi); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > max {
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	return data, nil
}
