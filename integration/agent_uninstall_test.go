package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAgentUninstall is §4 (5): `uninstall` removes the generated conflist
// and Catena's binaries, leaves the primary byte for byte, and names the
// attachment that still has a record; new sandboxes run through the
// primary, and a sandbox created through Catena still tears down cleanly
// (its DEL now reaches the primary's plugins directly, with libcni's cached
// result).
func TestAgentUninstall(t *testing.T) {
	onBothContainerds(t, func(t *testing.T, n *agentNode) {
		n.installOnce()
		n.waitLoaded(true)
		primary, err := os.ReadFile(filepath.Join(n.confDir, primaryName))
		require.NoError(t, err)

		catID, err := n.d.runPod(n.d.podConfig("viacatena", hostPort()))
		require.NoError(t, err, n.d.logTail())
		require.Len(t, n.w.records(n.net), 1)

		out, errOut, code := n.agent("uninstall", "--cni-conf-dir", n.confDir, "--cni-bin-dir", n.binDir, "--cache-dir", n.w.cacheDir)
		require.Zero(t, code, "uninstall: %s%s", out, errOut)
		_, err = os.Stat(filepath.Join(n.confDir, generatedName))
		assert.ErrorIs(t, err, os.ErrNotExist, "the generated conflist is removed")
		for _, b := range []string{"catena", "catenactl"} {
			_, err = os.Stat(filepath.Join(n.binDir, b))
			assert.ErrorIs(t, err, os.ErrNotExist, "%s is removed from the bin dir", b)
		}
		after, err := os.ReadFile(filepath.Join(n.confDir, primaryName))
		require.NoError(t, err)
		assert.Equal(t, primary, after, "the primary is untouched byte for byte")
		assert.Contains(t, out, "1 attachment(s) still have a record")
		assert.Contains(t, out, catID)
		n.waitLoaded(false)

		plainID, err := n.d.runPod(n.d.podConfig("plain", hostPort()))
		require.NoError(t, err, n.d.logTail())
		assert.Empty(t, opsFor(catenaOps(t, n.w.cacheDir), "ADD", plainID), "the new sandbox does not go through Catena")
		assert.Len(t, n.w.records(n.net), 1, "and has no record")
		assert.Len(t, n.w.ipamFiles(n.net), 2)

		n.stopRemoveAll()
		n.requireNothingHeld(catID, plainID)
		assert.Empty(t, libcniEntries(t, catID))
		left := n.w.records(n.net)
		assert.Len(t, left, 1, "the Catena sandbox's record stays: Catena was not called for its DEL")
		t.Logf("containerd %s, uninstall: primary unchanged (%d bytes), generated file and binaries removed; "+
			"after Stop+Remove of the Catena and the plain sandbox: %d IPs, %d veths, %d iptables mentions; %d record left (%s)",
			n.v.name, len(primary), len(n.w.ipamFiles(n.net)), len(n.w.hostVeths()),
			iptablesMentions(t, catID)+iptablesMentions(t, plainID), len(left), filepath.Base(strings.Join(left, " ")))
	})
}
