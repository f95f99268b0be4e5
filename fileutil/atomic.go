package fileutil

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/afero"
)

// WriteFileAtomic atomically and durably replaces path with data, a file
// of mode perm, for writers that hold no lock on path. Its temp file, in
// path's own directory, has a unique name (TempName), so two writers of
// the same path never write into each other's temp and the last rename
// wins whole; a reader sees the old content or the new, never a partial
// file, and a running executable keeps its inode. The temp file gets
// exactly perm: the umask may narrow the create, never widen it, and
// nothing is ever more permissive than asked.
func WriteFileAtomic(fsys afero.Fs, path string, data []byte, perm os.FileMode) error {
	return writeAtomic(fsys, path, bytes.NewReader(data), int64(len(data)), perm)
}

// WriteReaderAtomic is WriteFileAtomic of the size bytes of src, copied in
// chunks: a file of tens of MB (a binary installed) is never held in
// memory whole. A src that yields more or fewer than size bytes (a source
// file that changed meanwhile) is an error, and path is left as it was.
func WriteReaderAtomic(fsys afero.Fs, path string, src io.Reader, size int64, perm os.FileMode) error {
	return writeAtomic(fsys, path, io.LimitReader(src, size+1), size, perm)
}

// writeAtomic is WriteReaderAtomic of a src that yields at most size+1
// bytes.
func writeAtomic(fsys afero.Fs, path string, src io.Reader, size int64, perm os.FileMode) error {
	perm = perm.Perm()
	tmp, err := TempName(path)
	if err != nil {
		return err
	}
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return fmt.Errorf("create temp file for %s: %w", path, err)
	}
	if err := setMode(fsys, f, tmp, perm); err != nil {
		_ = f.Close()        // the chmod error is the one to report
		_ = fsys.Remove(tmp) // best effort, as above
		return fmt.Errorf("chmod %s: %w", tmp, err)
	}
	_, err = replaceWith(fsys, f, tmp, path, src, size)
	return err
}

// setMode gives the temp file f, just created at name, exactly perm, which
// the umask may have narrowed. A TrustedFs already did (its OpenFile gives
// a file it creates exactly perm, and it has no Chmod).
func setMode(fsys afero.Fs, f afero.File, name string, perm os.FileMode) error {
	if _, ok := fsys.(*walkFs); ok {
		return nil
	}
	if c, ok := f.(interface{ Chmod(os.FileMode) error }); ok {
		return c.Chmod(perm)
	}
	return fsys.Chmod(name, perm)
}

// TempName returns a unique hidden name next to path, ending in ".tmp", for
// writers that hold no lock (WriteFileAtomic, the store's writability
// probe): ".<name>.<16 hex digits>.tmp".
func TempName(path string) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("temp name for %s: %w", path, err)
	}
	dir, base := filepath.Split(path)
	return filepath.Join(dir, "."+base+"."+hex.EncodeToString(b[:])+TempExt), nil
}
