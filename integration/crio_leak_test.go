package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// netnsMounts lists the network namespaces CRI-O still has pinned (bind
// mounted under its namespaces_dir).
func (c *crioDaemon) netnsMounts() []string {
	c.t.Helper()
	raw, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(c.t, err)
	var out []string
	prefix := filepath.Join(c.dir, "ns", "netns") + "/"
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], prefix) {
			out = append(out, f[4])
		}
	}
	return out
}

// failedSandboxID is the sandbox ID a failed RunPodSandbox names.
func failedSandboxID(t *testing.T, err error) string {
	t.Helper()
	id := sandboxIDPattern.FindString(err.Error())
	require.NotEmpty(t, id, "RunPodSandbox's error names the sandbox: %v", err)
	return id
}

// TestCRIOLeakCatenaVersusPlainConflist is the seed failure under CRI-O,
// on one CRI-O whose network_dir is switched from one conflist to the
// next, each a network of its own:
//
//   - seed: the last plugin fails ADD and DEL. CRI-O DELs each failed
//     sandbox once, then forgets it. Through Catena that DEL succeeds and
//     nothing is held; as a plain conflist libcni's DEL stops at the
//     failing plugin, bridge/host-local never hear of it, and every attempt
//     leaks an IP that nothing will ever DEL again.
//   - wedge: a kube-ovn-like last delegate fails DEL unless its own ADD
//     completed, and the ADD fails in the delegate before it, so it never
//     ran. Through Catena CRI-O's DEL succeeds without reaching it, and
//     the pod's retry runs, stops and goes; as a plain conflist libcni's
//     DEL (in reverse order) reaches it first, fails, and bridge's IP leaks.
func TestCRIOLeakCatenaVersusPlainConflist(t *testing.T) {
	const attempts = 4
	w := newWorld(t)
	dir := t.TempDir()
	seedFault, wedgeFault := filepath.Join(dir, "seed-fault"), filepath.Join(dir, "wedge-fault")
	stateDir, ovnLog := filepath.Join(dir, "ovn-state"), filepath.Join(dir, "ovn.log")
	touch(t, seedFault)
	touch(t, wedgeFault)
	require.NoError(t, os.Mkdir(stateDir, 0o755))
	seedBad := failer(fmt.Sprintf(`"failAdd":true,"failDel":true,"faultFile":%q`, seedFault))
	wedgeBad := failer(fmt.Sprintf(`"failAdd":true,"faultFile":%q`, wedgeFault))
	ovn := failer(fmt.Sprintf(`"delRequiresAdd":true,"stateDir":%q,"logFile":%q`, stateDir, ovnLog))

	cases := []struct {
		name, network string
		catena        bool
		delegates     []string
		attempts      int
		wantLeaked    int
	}{
		{"seed catena", "crioseedcat-" + w.id, true, []string{w.bridgeDelegate(), seedBad}, attempts, 0},
		{"seed plain conflist", "crioseedplain-" + w.id, false, []string{w.bridgeDelegate(), seedBad}, attempts, attempts},
		// the plain conflist first: Catena's case ends with the fault lifted
		{"wedge plain conflist", "criowedgeplain-" + w.id, false, []string{w.bridgeDelegate(), wedgeBad, ovn}, 1, 1},
		{"wedge catena", "criowedgecat-" + w.id, true, []string{w.bridgeDelegate(), wedgeBad, ovn}, 1, 0},
	}
	var c *crioDaemon
	for i, tc := range cases {
		list := w.plainList(tc.network, "1.1.0", tc.delegates...)
		if tc.catena {
			list = w.catenaList(tc.network, "1.1.0", tc.delegates...)
		}
		if i == 0 {
			c = startCRIO(t, w, string(list.Bytes))
			c.waitNetworkReady()
		} else {
			c.switchNetwork(tc.network, string(list.Bytes))
		}
		var ids []string
		for range tc.attempts {
			_, err := c.runPod(c.podConfig("leak", 0))
			require.Error(t, err, "%s: RunPodSandbox fails", tc.name)
			ids = append(ids, failedSandboxID(t, err))
		}
		leaked := w.ipamFiles(tc.network)
		t.Logf("CRI-O, %s: %d RunPodSandbox attempts failed, %d IPs leaked, %d sandboxes, %d veths, %d netns pinned",
			tc.name, tc.attempts, len(leaked), len(c.pods()), len(w.hostVeths()), len(c.netnsMounts()))
		assert.Len(t, leaked, tc.wantLeaked, "%s: IPs held", tc.name)
		assert.Empty(t, c.pods(), "%s: CRI-O forgets a sandbox whose network failed: nothing will DEL it again", tc.name)
		if tc.catena {
			assert.Empty(t, w.hostVeths(), "%s: bridge's DEL removed the veth", tc.name)
		} else {
			// bridge never heard a DEL: the veth goes with the netns, which
			// the kernel destroys in the background once CRI-O unpins it
			assert.Eventually(t, func() bool { return len(w.hostVeths()) == 0 }, 10*time.Second, 20*time.Millisecond,
				"%s: the veth goes with the netns", tc.name)
		}
		out := run(t, "iptables-save")
		for _, id := range ids {
			assert.NotContains(t, out, id, "%s: no iptables rule names the sandbox", tc.name)
		}
		if !tc.catena {
			assert.Contains(t, c.log(), "Error stopping network on cleanup", "%s: CRI-O's DEL of the failed sandbox failed", tc.name)
			if strings.HasPrefix(tc.name, "wedge") {
				raw, err := os.ReadFile(ovnLog)
				require.NoError(t, err)
				assert.Contains(t, string(raw), "DEL "+ids[0]+" eth0", "the DEL reached the delegate that never ran")
				assert.NotContains(t, string(raw), "ADD "+ids[0])
				assert.Contains(t, c.log(), "DEL without a prior successful ADD")
			}
			continue
		}
		assert.Empty(t, w.records(tc.network), "%s: Catena keeps no record", tc.name)
		ops := catenaOps(t, w.cacheDir)
		for _, id := range ids {
			dels := opsFor(ops, "DEL", id)
			require.Len(t, dels, 1, "%s: CRI-O DELs the failed sandbox %s once", tc.name, id)
			assert.Equal(t, "ok", dels[0].Outcome, "%s: the DEL succeeds", tc.name)
			assert.Empty(t, dels[0].Calls, "%s: the ADD's rollback already tore down what ran: the DEL invokes nothing", tc.name)
		}
		if strings.HasPrefix(tc.name, "wedge") {
			assertCRIOUnwedged(t, w, c, tc.network, ids[0], wedgeFault, stateDir, ovnLog)
		}
	}
}

// assertCRIOUnwedged: the delegate that never ran heard nothing of the
// failed sandbox; once the fault is lifted the pod's retry runs through
// every delegate, and its Stop and Remove leave nothing held.
func assertCRIOUnwedged(t *testing.T, w *world, c *crioDaemon, network, failed, fault, stateDir, ovnLog string) {
	t.Helper()
	raw, err := os.ReadFile(ovnLog)
	if err != nil && !os.IsNotExist(err) {
		require.NoError(t, err)
	}
	assert.NotContains(t, string(raw), failed, "no ADD or DEL of the failed sandbox reached the delegate that never ran")
	require.NoError(t, os.Remove(fault))
	id := c.mustRunPod("leak", 0)
	_, ip, _, err := c.podStatus(id)
	require.NoError(t, err)
	assert.Equal(t, []string{ip}, w.ipamFiles(network))
	assert.Len(t, stateFiles(t, stateDir), 1, "the retry's ADD reached the last delegate")
	require.NoError(t, c.stopPod(id), c.logTail())
	require.NoError(t, c.removePod(id), c.logTail())
	assert.Empty(t, c.pods())
	assert.Empty(t, w.ipamFiles(network), "nothing held")
	assert.Empty(t, w.records(network))
	assert.Empty(t, w.hostVeths())
	assert.Empty(t, stateFiles(t, stateDir), "the delegate holds nothing")
	assert.Empty(t, c.netnsMounts(), "no netns left pinned")
}
