package nodeconf

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSyncChecksPluginBinaries: with PluginDirs set, a primary naming a
// plugin binary in none of them is not wrapped, and the generated file
// stays as the last good pass wrote it; a binary in any of the dirs does,
// a directory of that name does not; no PluginDirs, nothing is checked.
func TestSyncChecksPluginBinaries(t *testing.T) {
	const calicoCL = `{"cniVersion":"0.3.1","name":"podnet","plugins":[{"type":"calico"},{"type":"bandwidth"},{"type":"portmap"}]}`
	for _, tc := range []struct {
		name    string
		dirs    []string
		files   []string // created as regular files
		subdirs []string // created as directories
		wantErr string
	}{
		{name: "all in the first dir", dirs: []string{"/a", "/b"}, files: []string{"/a/calico", "/a/bandwidth", "/a/portmap"}},
		{name: "spread over the dirs", dirs: []string{"/a", "/b"}, files: []string{"/b/calico", "/a/bandwidth", "/b/portmap"}},
		{name: "one missing", dirs: []string{"/a", "/b"}, files: []string{"/a/calico", "/b/portmap"},
			wantErr: `primary 10-calico.conflist: plugin 1, "bandwidth": plugin binary missing: no such file in /a:/b (--cni-path)`},
		{name: "a dir of its name", dirs: []string{"/a"}, files: []string{"/a/calico", "/a/portmap"}, subdirs: []string{"/a/bandwidth"},
			wantErr: `plugin 1, "bandwidth": plugin binary missing`},
		{name: "dir missing", dirs: []string{"/nowhere"}, wantErr: `plugin 0, "calico": plugin binary missing: no such file in /nowhere`},
		{name: "not checked", dirs: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst, _ := newTestInstaller(t, map[string]string{"10-calico.conflist": bridgeCL})
			mustSync(t, inst) // PluginDirs unset: bridge's binaries are not looked for
			good := generatedFile(t, inst)
			inst.Cfg.PluginDirs = tc.dirs
			for _, f := range tc.files {
				require.NoError(t, afero.WriteFile(inst.Fs, f, []byte("#!"), 0o755))
			}
			for _, d := range tc.subdirs {
				require.NoError(t, inst.Fs.MkdirAll(d, 0o755))
			}
			require.NoError(t, afero.WriteFile(inst.Fs, filepath.Join(confDir, "10-calico.conflist"), []byte(calicoCL), 0o644))
			st, err := inst.Sync(context.Background())
			if tc.wantErr == "" {
				require.NoError(t, err)
				assert.True(t, st.Wrote)
				assert.Contains(t, string(generatedFile(t, inst)), `"type": "calico"`)
				assert.NoError(t, inst.Current())
				return
			}
			require.ErrorIs(t, err, ErrPluginMissing)
			assert.Contains(t, err.Error(), tc.wantErr)
			assert.Contains(t, err.Error(), "or set --cni-path to the runtime's CNI bin dirs; nothing written, 00-catena.conflist stays as it was")
			assert.False(t, st.Ready)
			assert.Equal(t, good, generatedFile(t, inst), "the last good generated file stays")
			assert.ErrorContains(t, inst.Current(), tc.wantErr, "readiness says why")
		})
	}
}

// TestCurrentNoticesRemovedPlugin: readiness reads the dirs at each probe.
func TestCurrentNoticesRemovedPlugin(t *testing.T) {
	inst, _ := newTestInstaller(t, map[string]string{"10-calico.conflist": bridgeCL})
	inst.Cfg.PluginDirs = []string{"/opt/cni/bin"}
	for _, p := range []string{"bridge", "portmap", "bandwidth"} {
		require.NoError(t, afero.WriteFile(inst.Fs, "/opt/cni/bin/"+p, []byte("#!"), 0o755))
	}
	mustSync(t, inst)
	require.NoError(t, inst.Current())
	require.NoError(t, inst.Fs.Remove("/opt/cni/bin/portmap"))
	err := inst.Current()
	require.ErrorIs(t, err, ErrPluginMissing)
	assert.Contains(t, err.Error(), `plugin 1, "portmap"`)
}
