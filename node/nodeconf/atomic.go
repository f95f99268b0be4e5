package nodeconf

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/fileutil"
)

// WriteFileAtomic makes path hold data with mode perm, only if it does not
// already: it reports whether it wrote. It writes a hidden temp file in
// path's own directory (containerd reloads on Rename and Write events in its
// conf dir, ignores Create, and never sees a file renamed in from
// elsewhere), fsyncs it, renames it over path and fsyncs the directory. A
// reader sees the old content or the new, never a partial file; a running
// executable keeps its inode.
func WriteFileAtomic(fsys afero.Fs, path string, data []byte, perm os.FileMode) (bool, error) {
	return replaceAtomic(fsys, path, bytes.NewReader(data), int64(len(data)), perm)
}

// replaceAtomic is WriteFileAtomic of the size bytes of src, which it reads
// in chunks (once to compare, once to copy): a binary of tens of MB is
// never held in memory whole.
func replaceAtomic(fsys afero.Fs, path string, src io.ReaderAt, size int64, perm os.FileMode) (bool, error) {
	same, err := sameContent(fsys, path, io.NewSectionReader(src, 0, size), size, perm)
	if err != nil {
		return false, err
	}
	if same {
		return false, nil
	}
	dir, base := filepath.Split(path)
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return false, fmt.Errorf("temp name for %s: %w", path, err)
	}
	// The temp name has no config extension, so no runtime ever loads it.
	tmp := filepath.Join(dir, "."+base+"."+hex.EncodeToString(b[:])+".tmp")
	if err := writeSynced(fsys, tmp, io.NewSectionReader(src, 0, size), size, perm); err != nil {
		_ = fsys.Remove(tmp) // best effort: the write's error is the one to report
		return false, err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		_ = fsys.Remove(tmp) // best effort, as above
		return false, fmt.Errorf("rename %s to %s: %w", tmp, path, err)
	}
	if err := fileutil.SyncDir(fsys, filepath.Clean(dir)); err != nil {
		return true, err
	}
	return true, nil
}

// writeSynced creates tmp exclusively, copies the size bytes of src into
// it, fsyncs and closes it.
func writeSynced(fsys afero.Fs, tmp string, src io.Reader, size int64, perm os.FileMode) error {
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	n, err := io.Copy(f, src)
	if err == nil && n != size {
		err = fmt.Errorf("%d bytes of %d: the source changed meanwhile", n, size)
	}
	if err != nil {
		_ = f.Close() // the write error is the one to report
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	// The umask may have narrowed perm at create.
	if err := fsys.Chmod(tmp, perm); err != nil {
		_ = f.Close() // the chmod error is the one to report
		return fmt.Errorf("chmod %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close() // the sync error is the one to report
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	return nil
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

// RemoveDurable removes path and fsyncs its directory. A missing path is
// not an error.
func RemoveDurable(fsys afero.Fs, path string) (bool, error) {
	err := fsys.Remove(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("remove %s: %w", path, err)
	}
	return true, fileutil.SyncDir(fsys, filepath.Dir(path))
}
