package nodeconf

import (
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCurrent: readiness reads the disk, not the last pass's status.
func TestCurrent(t *testing.T) {
	own := filepath.Join(confDir, ownName)
	primary := filepath.Join(confDir, "10-a.conflist")
	for _, tc := range []struct {
		name    string
		change  func(t *testing.T, i *Installer)
		wantErr string
	}{
		{name: "in place"},
		{name: "narrower mode", change: func(t *testing.T, i *Installer) { require.NoError(t, i.Fs.Chmod(own, 0o600)) }},
		{name: "removed", change: func(t *testing.T, i *Installer) { require.NoError(t, i.Fs.Remove(own)) }, wantErr: "is missing or is not what catena-agent writes"},
		{name: "edited", change: func(t *testing.T, i *Installer) {
			require.NoError(t, afero.WriteFile(i.Fs, own, []byte(`{}`), 0o644))
		}, wantErr: "is missing or is not what catena-agent writes"},
		{name: "wider mode", change: func(t *testing.T, i *Installer) { require.NoError(t, i.Fs.Chmod(own, 0o666)) }, wantErr: "is missing or is not"},
		{name: "primary changed", change: func(t *testing.T, i *Installer) {
			require.NoError(t, afero.WriteFile(i.Fs, primary, []byte(bridgeCL+" "), 0o644))
		}, wantErr: "the primary changed since the last pass"},
		{name: "primary gone", change: func(t *testing.T, i *Installer) { require.NoError(t, i.Fs.Remove(primary)) }, wantErr: "since the last pass"},
		{name: "renamed away by Cilium's exclusive mode", change: func(t *testing.T, i *Installer) {
			require.NoError(t, afero.WriteFile(i.Fs, filepath.Join(confDir, "05-cilium.conflist.tmp"), []byte(ciliumCL), 0o644))
			require.NoError(t, i.Fs.Rename(filepath.Join(confDir, "05-cilium.conflist.tmp"), filepath.Join(confDir, "05-cilium.conflist")))
			require.NoError(t, i.Fs.Rename(own, own+CiliumBackup))
		}, wantErr: "renamed to 00-catena.conflist.cilium_bak by Cilium's exclusive mode (cni.exclusive: true, Cilium's default; its 05-cilium.conflist is in the conf dir)"},
		{name: "shadowed", change: func(t *testing.T, i *Installer) {
			require.NoError(t, afero.WriteFile(i.Fs, filepath.Join(confDir, "00-a.conf"), []byte(`{}`), 0o644))
		}, wantErr: "00-a.conf sorts before"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i, _ := newTestInstaller(t, map[string]string{"10-a.conflist": bridgeCL})
			assert.EqualError(t, i.Current(), "no pass yet")
			mustSync(t, i)
			require.NoError(t, i.Current())
			if tc.change != nil {
				tc.change(t, i)
			}
			err := i.Current()
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
			assert.True(t, i.Status().Ready, "the cached status still says ready")
		})
	}
}
