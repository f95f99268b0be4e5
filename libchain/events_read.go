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

// maxEventLine bounds one line of the event journal that ReadEvents
// decodes: the journal's rotation size. An Op is a few hundred bytes plus
// the delegate text it carries; a longer line (junk, or a journal written
// before delegate text was bounded) is skipped without being held in
// memory.
const maxEventLine = eventsMaxSize

// ReadEvents returns the Ops of cacheDir's journal (the rotated file first)
// that started at or after since, and how many lines it skipped because
// they could not be read as an Op: longer than maxEventLine, not JSON (a
// torn last line, junk), or JSON of another shape. Whatever a line holds,
// reading goes on past it, and memory stays bounded by maxEventLine per
// line. Empty lines are ignored. A journal file that is a symlink or not a
// regular file is an error: it is not Catena's.
func ReadEvents(fsys afero.Fs, cacheDir string, since time.Time) (ops []Op, skipped int, err error) {
	fsys = cache.TrustedFs(fsys, cacheDir)
	path := EventsPath(cacheDir)
	for _, p := range []string{path + ".1", path} {
		n, err := readEventFile(fsys, p, func(line []byte) bool {
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
// to maxEventLine bytes and without its newline, and returns how many lines
// were too long or that use refused. A missing file has no lines.
func readEventFile(fsys afero.Fs, path string, use func(line []byte) bool) (int, error) {
	f, err := openEventFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	skipped := 0
	err = readLines(f, maxEventLine, func(line []byte, tooLong bool) {
		if tooLong || !use(line) {
			skipped++
		}
	})
	return skipped, err
}

// openEventFile opens a journal file for reading without following a
// symlink (O_NOFOLLOW, and O_NONBLOCK so that a FIFO does not block the
// open, on the real filesystem) and refuses anything but a regular file.
func openEventFile(fsys afero.Fs, path string) (afero.File, error) {
	flags := os.O_RDONLY
	if _, ok := fsys.(*afero.OsFs); ok {
		flags |= syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_CLOEXEC
	}
	f, err := fsys.OpenFile(path, flags, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("is a symlink: %w", err)
	}
	if err != nil {
		return nil, err
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
		return nil, err
	}
	return f, nil
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
