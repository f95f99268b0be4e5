package nodeconf

import (
	"fmt"
	"path/filepath"

	"github.com/catena-cni/catena/fileutil"
)

// Binaries are the executables catena-agent installs into the CNI bin dir.
var Binaries = []string{"catena", "catenactl"}

// maxBinarySize bounds what is copied of one binary.
const maxBinarySize = 256 << 20

// InstallBinaries copies each of names from srcDir into binDir, atomically
// (temp file in binDir, fsync, rename) and only where the content differs,
// and returns the names it copied. A catena already running keeps executing
// its own inode: rename never modifies the file it has open. The files are
// compared and copied in chunks: catena-agent runs this on every resync
// under its container's memory limit, and a binary is tens of MB.
func (i *Installer) InstallBinaries(srcDir, binDir string, names []string) ([]string, error) {
	var copied []string
	for _, name := range names {
		wrote, err := i.installBinary(filepath.Join(srcDir, name), filepath.Join(binDir, name))
		if err != nil {
			return copied, fmt.Errorf("installing %s into %s: %w", name, binDir, err)
		}
		if wrote {
			copied = append(copied, name)
		}
	}
	return copied, nil
}

// installBinary makes dst hold src's content, mode 0755, if it does not.
func (i *Installer) installBinary(src, dst string) (bool, error) {
	f, size, err := fileutil.OpenRegular(i.Fs, src, maxBinarySize, false)
	if err != nil {
		return false, err
	}
	defer func() { _ = f.Close() }()
	return replaceIfChanged(i.Fs, dst, f, size, 0o755)
}
