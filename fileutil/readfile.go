package fileutil

import (
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/spf13/afero"
)

// ReadSmallFile reads the regular file at path, at most limit bytes, for the
// config and list files that catena, catenactl and catena-agent read. It
// opens the file as OpenRegular does.
func ReadSmallFile(fsys afero.Fs, path string, limit int64, noFollow bool) ([]byte, error) {
	f, _, err := OpenRegular(fsys, path, limit, noFollow)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return data, nil
}

// OpenRegular opens the regular file at path for reading and returns it
// with its size, which must be at most limit. On the real filesystem the
// open never blocks on a FIFO swapped in (O_NONBLOCK) and, with noFollow,
// never follows a final symlink (O_NOFOLLOW); other filesystems get a plain
// read-only open.
func OpenRegular(fsys afero.Fs, path string, limit int64, noFollow bool) (afero.File, int64, error) {
	flags := os.O_RDONLY
	if _, ok := fsys.(*afero.OsFs); ok {
		flags |= syscall.O_CLOEXEC | syscall.O_NONBLOCK
		if noFollow {
			flags |= syscall.O_NOFOLLOW
		}
	}
	f, err := fsys.OpenFile(path, flags, 0)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("%s is not a regular file", path)
	case fi.Size() > limit:
		err = fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	if err != nil {
		_ = f.Close() // the stat's verdict is the error to report
		return nil, 0, err
	}
	return f, fi.Size(), nil
}
