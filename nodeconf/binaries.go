package nodeconf

import (
	"fmt"
	"path/filepath"
)

// Binaries are the executables catena-agent installs into the CNI bin dir.
var Binaries = []string{"catena", "catenactl"}

// maxBinarySize bounds what is copied of one binary.
const maxBinarySize = 256 << 20

// InstallBinaries copies each of names from srcDir into binDir, atomically
// (temp file in binDir, fsync, rename) and only where the content differs,
// and returns the names it copied. A catena already running keeps executing
// its own inode: rename never modifies the file it has open.
func (i *Installer) InstallBinaries(srcDir, binDir string, names []string) ([]string, error) {
	var copied []string
	for _, name := range names {
		src := filepath.Join(srcDir, name)
		data, err := readRegular(i.Fs, src, maxBinarySize)
		if err != nil {
			return copied, fmt.Errorf("installing %s into %s: %w", name, binDir, err)
		}
		wrote, err := WriteFileAtomic(i.Fs, filepath.Join(binDir, name), data, 0o755)
		if err != nil {
			return copied, fmt.Errorf("installing %s into %s: %w", name, binDir, err)
		}
		if wrote {
			copied = append(copied, name)
		}
	}
	return copied, nil
}
