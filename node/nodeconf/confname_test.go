package nodeconf

import (
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// generatedIn lists the conf dir's files that carry catena-agent's generated key.
func generatedIn(t *testing.T, fsys afero.Fs) []string {
	t.Helper()
	files, err := ConfFiles(fsys, confDir)
	require.NoError(t, err)
	var out []string
	for _, f := range files {
		data, err := afero.ReadFile(fsys, filepath.Join(confDir, f))
		require.NoError(t, err)
		if _, ok := ReadGenerated(data); ok {
			out = append(out, f)
		}
	}
	return out
}

// TestSyncAfterConfNameChange: the agent installed as
// 00-catena.conflist has pinned 10-p.conflist although 05-early.conflist
// appeared since; it restarts with another --conf-name. It must neither
// fail every pass (taking its own earlier file for a primary) nor lose the
// pin (switching to 05-early): it follows the pin the earlier file
// records, writes the new file, and removes the earlier one, so that one
// Catena file is left (the runtime loads the first by name, and two would
// mean that the one it loads is not the one kept current).
func TestSyncAfterConfNameChange(t *testing.T) {
	early := `{"cniVersion":"1.0.0","name":"early","plugins":[{"type":"ptp"}]}`
	for _, newName := range []string{"01-catena.conflist", "0-catena.conflist"} {
		t.Run(newName, func(t *testing.T) {
			inst, logs := newTestInstaller(t, map[string]string{"10-p.conflist": bridgeCL})
			assert.Equal(t, "10-p.conflist", mustSync(t, inst).Primary)
			require.NoError(t, afero.WriteFile(inst.Fs, filepath.Join(confDir, "05-early.conflist"), []byte(early), 0o644))
			assert.Equal(t, "10-p.conflist", mustSync(t, inst).Primary)

			renamed := &Installer{Fs: inst.Fs, Cfg: inst.Cfg, Log: inst.Log}
			renamed.Cfg.ConfName = newName
			for pass := 1; pass <= 3; pass++ {
				st := mustSync(t, renamed)
				assert.Equal(t, "10-p.conflist", st.Primary, "pass %d: the pin is kept", pass)
				assert.Equal(t, pass == 1, st.Wrote, "pass %d", pass)
				assert.Equal(t, []string{newName}, generatedIn(t, inst.Fs), "pass %d: one catena file", pass)
			}
			m, ok := ReadGenerated(generatedFile(t, renamed))
			require.True(t, ok)
			assert.Equal(t, "10-p.conflist", m.Source)
			assert.Contains(t, logs.String(), "00-catena.conflist")
			assert.NotContains(t, logs.String(), "file=00-catena.conflist primary=10-p.conflist", "no warning about catena's own earlier file")

			restarted := &Installer{Fs: inst.Fs, Cfg: renamed.Cfg, Log: inst.Log}
			st := mustSync(t, restarted)
			assert.Equal(t, "10-p.conflist", st.Primary)
			assert.False(t, st.Wrote)
		})
	}
}

// TestSyncOnlyGeneratedFiles: a conf dir whose only configs are files
// catena-agent generated (none naming a usable primary) has no primary,
// and says so.
func TestSyncOnlyGeneratedFiles(t *testing.T) {
	inst, _ := newTestInstaller(t, map[string]string{
		"10-a.conflist": `{"cniVersion":"1.0.0","name":"n","catena.dev/generated":{"by":"catena-agent"},"plugins":[{"type":"catena","delegates":[{"type":"bridge"}]}]}`,
	})
	_, err := inst.Sync(t.Context())
	require.ErrorIs(t, err, ErrNoPrimary)
	assert.ErrorContains(t, err, "10-a.conflist")
	assert.Nil(t, generatedFile(t, inst))
}
