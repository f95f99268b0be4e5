package nodeconf

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWriteIfChanged: content and mode as asked, no temp file left, and a
// second write of the same content does nothing.
func TestWriteIfChanged(t *testing.T) {
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
		wrote, err := writeIfChanged(fsys, path, []byte(tc.data), tc.perm)
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
	t.Cleanup(func() { _ = running.Close() })

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
	assert.NoError(t, err, "a file without the generated key stays")
}

// TestInstallBinariesInBoundedMemory: catena-agent installs the binaries
// on every resync (30 s) under its container's memory limit (128 MiB), and
// a binary is tens of MB (20 MB for an unstripped catenactl). A pass
// compares and copies them in chunks: whether it copies (a new binary) or
// not (the steady state), it allocates far less than one binary. Reading
// them whole allocated about twice their size per pass, and the agent was
// OOMKilled in TestKubernetesNode.
func TestInstallBinariesInBoundedMemory(t *testing.T) {
	const size = 8 << 20
	src, bin := t.TempDir(), t.TempDir()
	write := func(seed byte) {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*7) ^ seed
		}
		for _, name := range Binaries {
			require.NoError(t, os.WriteFile(filepath.Join(src, name), data, 0o755))
		}
	}
	inst := &Installer{Fs: afero.NewOsFs()}
	for _, tc := range []struct {
		name   string
		seed   byte
		copied []string
	}{
		{"first install", 1, Binaries},
		{"steady state", 1, nil},
		{"new binaries", 2, Binaries},
		{"steady state again", 2, nil},
	} {
		write(tc.seed)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		copied, err := inst.InstallBinaries(src, bin, Binaries)
		runtime.ReadMemStats(&after)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.copied, copied, tc.name)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: %d bytes allocated to install two binaries of %d", tc.name, alloc, size)
		assert.Less(t, alloc, uint64(1<<20), "%s: %d bytes allocated to install two binaries of %d", tc.name, alloc, size)
		for _, name := range Binaries {
			got, err := os.ReadFile(filepath.Join(bin, name))
			require.NoError(t, err)
			want, err := os.ReadFile(filepath.Join(src, name))
			require.NoError(t, err)
			assert.True(t, bytes.Equal(want, got), "%s: %s installed whole", tc.name, name)
		}
	}
}
