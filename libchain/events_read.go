package libchain

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/cache"
)

// ReadEvents returns the Ops of cacheDir's journal (the rotated file first)
// that started at or after since, and how many lines it skipped because
// they could not be read as an Op: longer than MaxEventLine (which Append
// never writes: junk, or a line of an older Catena), not JSON (a torn last
// line, junk), or JSON of another shape. Whatever a line holds, reading
// goes on past it, and memory stays bounded by MaxEventLine per line. Empty lines are ignored. A journal file that is a symlink or not a
// regular file is an error: it is not Catena's.
func ReadEvents(fsys afero.Fs, cacheDir string, since time.Time) (ops []Op, skipped int, err error) {
	path := EventsPath(cacheDir)
	for _, p := range []string{path + ".1", path} {
		n, err := readEventFile(fsys, cacheDir, p, func(line []byte) bool {
			var op Op
			if json.Unmarshal(line, &op) != nil {
				return false
			}
			if !op.Start.Before(since) {
				ops = append(ops, op)
			}
			return true
		})
		skipped += n
		if err != nil {
			return nil, skipped, fmt.Errorf("read event journal %s: %w", p, err)
		}
	}
	return ops, skipped, nil
}

// readEventFile calls use with each non-empty line of the file at path, up
// to MaxEventLine bytes and without its newline, and returns how many lines
// were too long or that use refused. A missing file has no lines.
func readEventFile(fsys afero.Fs, cacheDir, path string, use func(line []byte) bool) (int, error) {
	f, _, err := OpenEventFile(fsys, cacheDir, path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	skipped := 0
	err = readLines(f, MaxEventLine, func(line []byte, tooLong bool) {
		if tooLong || !use(line) {
			skipped++
		}
	})
	return skipped, err
}

// OpenEventFile opens a file of cacheDir's event journal for reading, as
// ReadEvents and the agent's metrics tail do: through the cache's trusted
// walk (cache.TrustedFs: no symlink followed, a FIFO never blocks the open),
// refusing anything but a regular file of Catena's own that no other user
// could have written. It also returns the file's info.
func OpenEventFile(fsys afero.Fs, cacheDir, path string) (afero.File, os.FileInfo, error) {
	f, err := cache.TrustedFs(fsys, cacheDir).Open(path)
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
		err = cache.CheckPrivateFile(path, fi) // another user could have written it
	}
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// readLines calls fn with each non-empty line of r, without its newline. A
// line longer than max is passed as tooLong, empty, and the rest of it is
// read and discarded, so memory stays bounded by max whatever r holds. A
// final line without a newline (a torn append) is passed like any other.
func readLines(r io.Reader, max int, fn func(line []byte, tooLong bool)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(bytes.TrimSuffix(chunk, []byte("\n"))) > max {
				tooLong, line = true, line[:0]
			} else {
				line = appendDoubling(line, chunk)
			}
		}
		switch {
		case err == nil, errors.Is(err, io.EOF):
			line = bytes.TrimSuffix(line, []byte("\n"))
			if len(line) > 0 || tooLong {
				fn(line, tooLong)
			}
			if err != nil {
				return nil
			}
			line, tooLong = line[:0], false
		case errors.Is(err, bufio.ErrBufferFull):
			// the line goes on
		default:
			return err
		}
	}
}

// appendDoubling appends b to line, doubling its capacity when it must
// grow, so that a line of n bytes costs at most 2n of allocations (append
// grows large slices by a quarter, which costs some 5n).
func appendDoubling(line, b []byte) []byte {
	if need := len(line) + len(b); need > cap(line) {
		grown := make([]byte, len(line), max(need, 2*cap(line)))
		copy(grown, line)
		line = grown
	}
	return append(line, b...)
}
