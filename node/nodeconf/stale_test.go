package nodeconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMountRoot: the root of the topmost mount at a mount point, with the
// kernel's octal escapes undone.
func TestMountRoot(t *testing.T) {
	const table = `22 1 0:21 / / rw - ext4 /dev/sda1 rw
30 22 0:21 /etc/cni/net.d /etc/cni/net.d rw - ext4 /dev/sda1 rw
31 22 0:21 /var/lib/cni /var/lib/cni rw - ext4 /dev/sda1 rw
40 22 0:21 /etc/cni/net.d.old /etc/cni/net.d rw - ext4 /dev/sda1 rw
41 22 0:21 /a\040b//deleted /mnt/x\040y rw - ext4 /dev/sda1 rw
short line
`
	for _, tc := range []struct {
		dir, root string
		found     bool
	}{
		{"/etc/cni/net.d", "/etc/cni/net.d.old", true},
		{"/var/lib/cni", "/var/lib/cni", true},
		{"/mnt/x y", "/a b//deleted", true},
		{"/opt/cni/bin", "", false},
	} {
		root, found, err := mountRoot(strings.NewReader(table), tc.dir)
		require.NoError(t, err)
		assert.Equal(t, tc.found, found, tc.dir)
		assert.Equal(t, tc.root, root, tc.dir)
	}
	assert.Equal(t, `\777x\08`, unescapeMountinfo(`\777x\08`), "not escapes: kept")
}

// TestStaleMountNotAMount: a conf dir that is no mount point, or missing,
// is never stale.
func TestStaleMountNotAMount(t *testing.T) {
	dir := t.TempDir()
	i := &Installer{Fs: afero.NewOsFs(), Cfg: Config{ConfDir: dir}}
	require.NoError(t, i.StaleMount())
	require.NoError(t, os.Rename(dir, dir+".old"))
	t.Cleanup(func() { _ = os.RemoveAll(dir + ".old") })
	require.NoError(t, os.Mkdir(dir, 0o755))
	assert.NoError(t, i.StaleMount(), "replaced: the watch re-arms")
	i.Cfg.ConfDir = filepath.Join(dir, "missing")
	assert.NoError(t, i.StaleMount())
}

// TestStaleMountOnlyOnTheHost: the mount check looks at the host's conf dir,
// so an Installer on another filesystem has none to check, whatever the
// host holds at the same path (here a path the host cannot stat: through a
// regular file; an unreadable /etc/cni does the same to a user).
func TestStaleMountOnlyOnTheHost(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	dir := filepath.Join(file, "net.d")
	i, _ := newTestInstaller(t, map[string]string{"10-bridge.conflist": bridgeCL})
	i.Cfg.ConfDir = dir
	require.NoError(t, i.Fs.MkdirAll(dir, 0o755))
	require.NoError(t, afero.WriteFile(i.Fs, filepath.Join(dir, "10-bridge.conflist"), []byte(bridgeCL), 0o644))
	require.NoError(t, i.StaleMount())
	mustSync(t, i)
	assert.NoError(t, i.Current(), "ready on its own filesystem")

	host := &Installer{Fs: afero.NewOsFs(), Cfg: Config{ConfDir: dir}}
	assert.ErrorContains(t, host.StaleMount(), "not a directory", "on the host the same path is checked")
}
