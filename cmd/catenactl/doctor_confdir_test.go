package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const ciliumConflist = `{"cniVersion":"0.3.1","name":"cilium","plugins":[{"type":"cilium-cni"}]}`

// TestDoctorCiliumBackup: a generated conflist renamed to .cilium_bak is a
// problem naming Cilium's exclusive mode and the fix (or another writer
// when no Cilium config is there), a leftover once the file is back, and no
// check at all otherwise (TestDoctorHealthy).
func TestDoctorCiliumBackup(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cilium     bool // Cilium's 05-cilium.conflist written
		back       bool // the generated file rewritten since
		wantStatus string
		wantText   string
		wantHint   string
	}{
		{name: "renamed by Cilium's exclusive mode", cilium: true, wantStatus: statusProblem,
			wantText: "00-catena.conflist was renamed to 00-catena.conflist.cilium_bak by Cilium's exclusive mode (cni.exclusive: true, Cilium's default; its 05-cilium.conflist is in the conf dir)",
			wantHint: "set cni.exclusive: false in Cilium's Helm values"},
		{name: "renamed, no Cilium config", wantStatus: statusProblem,
			wantText: "removed or changed by another writer", wantHint: "find what renames"},
		{name: "back in place", cilium: true, back: true, wantStatus: statusOK,
			wantText: "00-catena.conflist.cilium_bak left by Cilium's exclusive mode earlier; the generated file is in place again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "okplug")
			wrapWithAgent(t, f)
			own := filepath.Join(f.netDir, "00-catena.conflist")
			if tc.cilium {
				f.writeConf("05-cilium.conflist", ciliumConflist)
			}
			data, err := os.ReadFile(own)
			require.NoError(t, err)
			require.NoError(t, os.Rename(own, own+".cilium_bak"))
			if tc.back {
				require.NoError(t, os.WriteFile(own, data, 0o644))
			}
			out, _, code := f.runRaw("--cni-path", f.cniDir, "doctor", "--json")
			res := decodeJSON[doctorOutput](t, out)
			var c *check
			for n := range res.Checks {
				if res.Checks[n].Check == confDirCheckName {
					c = &res.Checks[n]
				}
			}
			require.NotNil(t, c, "no conf dir check: %s", out)
			assert.Equal(t, tc.wantStatus, c.Status, c.Detail)
			assert.Contains(t, c.Detail, tc.wantText)
			if tc.wantStatus == statusProblem {
				assert.Equal(t, 1, code)
				assert.Contains(t, c.Hint, tc.wantHint)
				assert.Contains(t, c.Items, own+".cilium_bak")
			}
		})
	}
}
