package nodeconf

import (
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWhoTook: Cilium is named only when the generated file's .cilium_bak
// (with catena-agent's generated key) and Cilium's config are both there.
func TestWhoTook(t *testing.T) {
	own := filepath.Join(confDir, ownName)
	for _, tc := range []struct {
		name   string
		files  map[string]string
		backup string // the .cilium_bak's content; "" none; "generated": the generated file
		by     string
		cilium string
	}{
		{name: "05-cilium.conflist", files: map[string]string{"05-cilium.conflist": ciliumCL}, backup: "generated", by: TakenByCilium, cilium: "05-cilium.conflist"},
		{name: "legacy 05-cilium.conf", files: map[string]string{"05-cilium.conf": `{"type":"cilium-cni"}`}, backup: "generated", by: TakenByCilium, cilium: "05-cilium.conf"},
		{name: "a single cilium-cni config", files: map[string]string{"90-x.conf": `{"cniVersion":"0.3.1","name":"x","type":"cilium-cni"}`}, backup: "generated", by: TakenByCilium, cilium: "90-x.conf"},
		{name: "no Cilium config", files: map[string]string{"10-a.conflist": bridgeCL}, backup: "generated", by: TakenByOther},
		{name: "no backup", files: map[string]string{"05-cilium.conflist": ciliumCL}, by: TakenByOther, cilium: "05-cilium.conflist"},
		{name: "a backup that is not catena-agent's", files: map[string]string{"05-cilium.conflist": ciliumCL}, backup: bridgeCL, by: TakenByOther, cilium: "05-cilium.conflist"},
		{name: "a config that does not parse", files: map[string]string{"10-a.conflist": "{"}, backup: "generated", by: TakenByOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i, _ := newTestInstaller(t, map[string]string{"10-a.conflist": bridgeCL})
			mustSync(t, i)
			for name, data := range tc.files {
				require.NoError(t, afero.WriteFile(i.Fs, filepath.Join(confDir, name), []byte(data), 0o644))
			}
			switch tc.backup {
			case "":
				require.NoError(t, i.Fs.Remove(own))
			case "generated":
				require.NoError(t, i.Fs.Rename(own, own+CiliumBackup))
			default:
				require.NoError(t, i.Fs.Remove(own))
				require.NoError(t, afero.WriteFile(i.Fs, own+CiliumBackup, []byte(tc.backup), 0o644))
			}
			got, err := WhoTook(i.Fs, confDir, ownName)
			require.NoError(t, err)
			assert.Equal(t, tc.by, got.By())
			assert.Equal(t, own, got.File)
			if tc.cilium != "" {
				assert.Equal(t, filepath.Join(confDir, tc.cilium), got.Cilium)
			} else {
				assert.Empty(t, got.Cilium)
			}
			if tc.by == TakenByCilium {
				assert.Equal(t, own+CiliumBackup, got.Backup)
				assert.Contains(t, got.Error(), "set cni.exclusive: false in Cilium's Helm values")
				assert.Contains(t, got.Error(), "in Cilium's chaining mode too")
			} else {
				assert.Contains(t, got.Error(), "another writer")
			}
		})
	}
}
