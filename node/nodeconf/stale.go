package nodeconf

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/spf13/afero"
	"golang.org/x/sys/unix"
)

// ErrStaleMount: the conf dir is a mount that no longer shows the host's
// conf dir. Only a new mount (a restart of the container) shows the new
// one, so catena-agent exits.
var ErrStaleMount = errors.New("stale conf dir mount")

// nodeState is what the Installer remembers of the node between passes.
type nodeState struct {
	mu sync.Mutex
	// mountRoot is the root, as /proc/self/mountinfo names it, of the
	// mount at the conf dir when first seen; "" if it is no mount point.
	mountRoot string
	seen      bool
}

// mountinfoPath is the kernel's table of this process's mounts.
const mountinfoPath = "/proc/self/mountinfo"

// StaleMount reports whether the conf dir is a bind mount (a hostPath
// volume) whose source the host has deleted (the dir's link count is 0, or
// the mount's root ends in //deleted) or renamed (the mount's root, the
// source's path within its file system, is no longer the one first seen).
// A host that replaces /etc/cni/net.d (mv net.d net.d.old; mkdir net.d)
// leaves such a mount showing the old inode: every write goes where the
// runtime no longer looks. Not being a mount point, or a missing dir, is
// not stale (the watch re-arms on a replaced dir). Only a conf dir on the
// host's filesystem (an *afero.OsFs) is checked: on any other, the host's
// mounts say nothing of it.
func (i *Installer) StaleMount() error {
	if _, onHost := i.Fs.(*afero.OsFs); !onHost {
		return nil
	}
	dir := filepath.Clean(i.Cfg.ConfDir)
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("stat %s: %w", dir, err)
	}
	if st.Nlink == 0 {
		return fmt.Errorf("%w: %s was deleted on the host (link count 0) but stays mounted here: exiting so that the container is restarted with a fresh mount", ErrStaleMount, dir)
	}
	f, err := os.Open(mountinfoPath)
	if err != nil {
		return fmt.Errorf("reading %s: %w", mountinfoPath, err)
	}
	defer func() { _ = f.Close() }()
	root, found, err := mountRoot(f, dir)
	if err != nil {
		return fmt.Errorf("reading %s: %w", mountinfoPath, err)
	}
	i.node.mu.Lock()
	defer i.node.mu.Unlock()
	if !i.node.seen {
		i.node.seen, i.node.mountRoot = true, root
		if !found {
			i.node.mountRoot = ""
		}
	}
	switch {
	case !found || i.node.mountRoot == "":
		return nil
	case strings.HasSuffix(root, "//deleted"):
		return fmt.Errorf("%w: %s is a mount of %s, which was deleted on the host: exiting so that the container is restarted with a fresh mount", ErrStaleMount, dir, strings.TrimSuffix(root, "//deleted"))
	case root != i.node.mountRoot:
		return fmt.Errorf("%w: %s is a mount of %s, which the host renamed to %s (and may have replaced): exiting so that the container is restarted with a fresh mount", ErrStaleMount, dir, i.node.mountRoot, root)
	}
	return nil
}

// mountRoot returns the root field of the last (topmost) mount whose mount
// point is dir, from a mountinfo table.
func mountRoot(r io.Reader, dir string) (string, bool, error) {
	var root string
	found := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options ...
		fields := bytes.Fields(sc.Bytes())
		if len(fields) < 5 {
			continue
		}
		if unescapeMountinfo(string(fields[4])) == dir {
			root, found = unescapeMountinfo(string(fields[3])), true
		}
	}
	return root, found, sc.Err()
}

// unescapeMountinfo undoes the kernel's octal escapes (\040 for a space,
// \011, \012, \134) in a mountinfo path.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) && isOctal(s[i+1:i+4]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	if len(s) != 3 {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '7' {
			return false
		}
	}
	return s[0] <= '3'
}
