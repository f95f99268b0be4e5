package fileutil

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/afero"
)

// WriteFileAtomic is WriteFileDurable for writers that hold no lock: its
// temp file has a unique name (TempName), so two writers of the same path
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
