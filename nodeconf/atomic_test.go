package nodeconf

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWriteFileAtomic: content and mode as asked, no temp file left, and a
// second write of the same content does nothing.
func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	fsys := afero.NewOsFs()
	path := filepath.Join(dir, "00-catena.conflist")
	for _, tc := range []struct {
		data      string
		perm      os.FileMode
		wantWrote bool
	}{
		{"one", 0o644, true},
		{"one", 0o644, false},
		{"two", 0o644, true},
		{"two", 0o600, true},
		{"", 0o600, true},
		{"", 0o600, false},
	} {
		wrote, err := WriteFileAtomic(fsys, path, []byte(tc.data), tc.perm)
		require.NoError(t, err)
		assert.Equal(t, tc.wantWrote, wrote, "%q %v", tc.data, tc.perm)
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, tc.data, string(got))
		fi, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, tc.perm, fi.Mode().Perm())
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.Len(t, entries, 1, "no temp file left")
	}
}

// TestInstallBinariesKeepsRunningInode: a binary open (as by a running
// catena) keeps its content when a new one is installed; unchanged binaries
// are not copied again.
func TestInstallBinariesKeepsRunningInode(t *testing.T) {
	src, bin := t.TempDir(), t.TempDir()
	write := func(name, data string) {
		require.NoError(t, os.WriteFile(filepath.Join(src, name), []byte(data), 0o755))
	}
	write("catena", "v1 catena")
	write("catenactl", "v1 ctl")
	inst := &Installer{Fs: afero.NewOsFs()}
	copied, err := inst.InstallBinaries(src, bin, Binaries)
	require.NoError(t, err)
	assert.Equal(t, []string{"catena", "catenactl"}, copied)

	running, err := os.Open(filepath.Join(bin, "catena"))
	require.NoError(t, err)
	t.Cleanup(func() { running.Close() })

	write("catena", "v2 catena, longer")
	copied, err = inst.InstallBinaries(src, bin, Binaries)
	require.NoError(t, err)
	assert.Equal(t, []string{"catena"}, copied)

	old := make([]byte, 64)
	n, err := running.ReadAt(old, 0)
	require.ErrorContains(t, err, "EOF")
	assert.Equal(t, "v1 catena", string(old[:n]), "the running binary's inode is untouched")
	got, err := os.ReadFile(filepath.Join(bin, "catena"))
	require.NoError(t, err)
	assert.Equal(t, "v2 catena, longer", string(got))
	fi, err := os.Stat(filepath.Join(bin, "catena"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm())

	copied, err = inst.InstallBinaries(src, bin, Binaries)
	require.NoError(t, err)
	assert.Empty(t, copied)

	_, err = inst.InstallBinaries(t.TempDir(), bin, Binaries)
	require.ErrorContains(t, err, "installing catena into "+bin)
}

// TestUninstall: only a marked file is removed, never the primary; the
// binaries only with a bin dir.
func TestUninstall(t *testing.T) {
	inst, _ := newTestInstaller(t, map[string]string{"10-a.conflist": bridgeCL})
	mustSync(t, inst)
	require.NoError(t, inst.Fs.MkdirAll("/opt/cni/bin", 0o755))
	for _, b := range append([]string{"bridge"}, Binaries...) {
		require.NoError(t, afero.WriteFile(inst.Fs, "/opt/cni/bin/"+b, []byte(b), 0o755))
	}
	u, err := Uninstall(inst.Fs, confDir, ownName, "/opt/cni/bin")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(confDir, ownName), u.Conf)
	assert.Equal(t, []string{"/opt/cni/bin/catena", "/opt/cni/bin/catenactl"}, u.Binaries)
	files, err := ConfFiles(inst.Fs, confDir)
	require.NoError(t, err)
	assert.Equal(t, []string{"10-a.conflist"}, files)
	got, err := afero.ReadFile(inst.Fs, filepath.Join(confDir, "10-a.conflist"))
	require.NoError(t, err)
	assert.Equal(t, bridgeCL, string(got))
	_, err = inst.Fs.Stat("/opt/cni/bin/bridge")
	assert.NoError(t, err, "other plugins stay")

	u, err = Uninstall(inst.Fs, confDir, ownName, "/opt/cni/bin")
	require.NoError(t, err, "uninstall twice is fine")
	assert.Equal(t, Uninstalled{}, u)

	require.NoError(t, afero.WriteFile(inst.Fs, filepath.Join(confDir, ownName), []byte(bridgeCL), 0o644))
	_, err = Uninstall(inst.Fs, confDir, ownName, "")
	require.ErrorIs(t, err, ErrNotOurs)
	_, err = inst.Fs.Stat(filepath.Join(confDir, ownName))
	assert.NoError(t, err, "a file without the marker stays")
}
