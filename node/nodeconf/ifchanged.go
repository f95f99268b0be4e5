package nodeconf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/fileutil"
)

// writeIfChanged makes path hold data with mode perm, only if it does not
// already: it reports whether it wrote. The write is fileutil's atomic
// one: a hidden temp file in path's own directory (containerd reloads on
// Rename and Write events in its conf dir, ignores Create, and never sees a
// file renamed in from elsewhere; the temp name has no config extension,
// so no runtime ever loads it), fsynced, renamed over path, and the
// directory fsynced. A reader sees the old content or the new, never a
// partial file; a running executable keeps its inode.
func writeIfChanged(fsys afero.Fs, path string, data []byte, perm os.FileMode) (bool, error) {
	return replaceIfChanged(fsys, path, bytes.NewReader(data), int64(len(data)), perm)
}

// replaceIfChanged is writeIfChanged of the size bytes of src, which it
// reads in chunks (once to compare, once to copy): a binary of tens of MB
// is never held in memory whole.
func replaceIfChanged(fsys afero.Fs, path string, src io.ReaderAt, size int64, perm os.FileMode) (bool, error) {
	same, err := sameContent(fsys, path, io.NewSectionReader(src, 0, size), size, perm)
	if err != nil {
		return false, err
	}
	if same {
		return false, nil
	}
	if err := fileutil.WriteReaderAtomic(fsys, path, io.NewSectionReader(src, 0, size), size, perm); err != nil {
		return false, err
	}
	return true, nil
}

// compareChunk is how much of each file sameContent reads at a time.
const compareChunk = 32 << 10

// sameContent reports whether path is a regular file with mode perm holding
// exactly the size bytes of want, compared chunk by chunk. A missing file
// is not an error.
func sameContent(fsys afero.Fs, path string, want io.Reader, size int64, perm os.FileMode) (bool, error) {
	fi, err := fsys.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stat %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() || fi.Size() != size || fi.Mode().Perm() != perm {
		return false, nil
	}
	f, err := fsys.Open(path)
	if err != nil {
		return false, fmt.Errorf("open %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	got, exp := make([]byte, compareChunk), make([]byte, compareChunk)
	for left := size; left > 0; {
		n := int(min(left, compareChunk))
		if _, err := io.ReadFull(want, exp[:n]); err != nil {
			return false, fmt.Errorf("read the content for %s: %w", path, err)
		}
		if _, err := io.ReadFull(f, got[:n]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				return false, nil // shrunk meanwhile: not the same
			}
			return false, fmt.Errorf("read %s: %w", path, err)
		}
		if !bytes.Equal(got[:n], exp[:n]) {
			return false, nil
		}
		left -= int64(n)
	}
	// nothing past size: it did not grow meanwhile
	n, err := f.Read(got[:1])
	if n > 0 {
		return false, nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	return true, nil
}
