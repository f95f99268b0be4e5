package events

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/fileutil"
)

// Read returns the Ops of cacheDir's journal (the rotated file first)
// that started at or after since, and what it skipped because it could
// not be read as an Op (decode). Whatever a line holds, reading goes on
// past it, and memory stays bounded by MaxLine; a torn last line is
// skipped like any other line that is not an operation. A journal file
// that is a symlink, not a regular file or not Catena's own is an error
// (openFile); a missing one has no lines.
func Read(fsys afero.Fs, cacheDir string, since time.Time) (ops []Op, skipped Skipped, err error) {
	path := Path(cacheDir)
	for _, p := range []string{path + ".1", path} {
		if err := readFile(fsys, cacheDir, p, &skipped, func(op Op) {
			if !op.Start.Before(since) {
				ops = append(ops, op)
			}
		}); err != nil {
			return nil, skipped, fmt.Errorf("read event journal %s: %w", p, err)
		}
	}
	return ops, skipped, nil
}

// readFile reads the whole file at path, torn last line included
// (readOps).
func readFile(fsys afero.Fs, cacheDir, path string, skipped *Skipped, use func(Op)) error {
	f, _, err := openFile(fsys, cacheDir, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	_, err = readOps(f, path, 0, true, skipped, use)
	return err
}

// openFile opens a file of cacheDir's journal for reading, as Read and
// Tail do: through the cache's trusted walk (fileutil.TrustedFs: no symlink
// followed, a FIFO never blocks the open), refusing anything but a
// regular file of Catena's own that no other user could have written. It
// also returns the file's info.
func openFile(fsys afero.Fs, cacheDir, path string) (afero.File, os.FileInfo, error) {
	f, err := fileutil.TrustedFs(fsys, cacheDir).Open(path)
	if errors.Is(err, syscall.ELOOP) {
		return nil, nil, fmt.Errorf("is a symlink: %w", err)
	}
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("is not a regular file (%s)", fi.Mode().Type())
	}
	if err == nil {
		err = fileutil.CheckPrivateFile(path, fi) // another user could have written it
	}
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}
