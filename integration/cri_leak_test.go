package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// touch creates an empty file, removed at cleanup.
func touch(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	t.Cleanup(func() { _ = os.Remove(path) })
}

// TestCRILeakCatenaVersusPlainConflist is containerd issue 12130 through
// the real CRI: the second plugin fails ADD and DEL. Ten RunPodSandbox
// attempts leak no IP through Catena, and one IP per attempt when the same
// plugins are a plain conflist, whose DEL stops at the failing plugin and
// never reaches bridge/host-local. Both on one daemon, one after the other.
//
// What is left differs by version: 2.4 forgets the failed sandboxes (the IPs
// are held by nothing), 1.6 keeps them NOTREADY, and their Stop fails too.
func TestCRILeakCatenaVersusPlainConflist(t *testing.T) {
	const attempts = 10
	for _, v := range []containerdVersion{containerd24(), containerd16()} {
		t.Run("containerd "+v.name, func(t *testing.T) {
			w := newWorld(t)
			fault := filepath.Join(t.TempDir(), "fault")
			touch(t, fault)
			bad := failer(fmt.Sprintf(`"failAdd":true,"failDel":true,"faultFile":%q`, fault))
			catenaNet, plainNet := "crileakcat-"+w.id, "crileakplain-"+w.id
			d := startContainerd(t, v, string(w.catenaList(catenaNet, v.cniVersion(), w.bridgeDelegate(), bad).Bytes))
			// after the test, lift the fault so that cleanup can remove
			// whatever sandbox 1.6 kept (cleanups run last-in first-out)
			t.Cleanup(func() { _ = os.Remove(fault) })

			cases := []struct {
				name, network string
				wantLeaked    int
			}{
				{"catena", catenaNet, 0},
				{"plain conflist", plainNet, attempts},
			}
			for _, tc := range cases {
				if tc.network == plainNet {
					d.setConflist(plainNet, string(w.plainList(plainNet, v.cniVersion(), w.bridgeDelegate(), bad).Bytes))
				}
				addFailures := 0
				for i := 0; i < attempts; i++ {
					if _, err := d.runPod(d.podConfig("leak", 0)); err != nil {
						addFailures++
					}
				}
				leaked := len(w.ipamFiles(tc.network))
				pods := d.pods()
				t.Logf("containerd %s, %s: %d RunPodSandbox attempts, %d failed, %d IPs leaked, %d sandboxes left",
					v.name, tc.name, attempts, addFailures, leaked, len(pods))
				assert.Equal(t, attempts, addFailures, tc.name)
				assert.Equal(t, tc.wantLeaked, leaked, tc.name)
				if tc.network == catenaNet {
					assert.Empty(t, w.records(catenaNet), "catena keeps no record")
					assert.Empty(t, pods, "no sandbox is left")
					dels := opsFor(catenaOps(t, w.cacheDir), "DEL", "")
					assert.GreaterOrEqual(t, len(dels), attempts, "containerd DELs each failed sandbox")
					for _, op := range dels {
						assert.Equal(t, "ok", op.Outcome, "every DEL containerd sends succeeds: %+v", op)
					}
					continue
				}
				if v.legacy {
					assert.Len(t, pods, attempts, "1.6 keeps each failed sandbox, NOTREADY")
					require.Error(t, d.stopPod(pods[0]), "and cannot stop it: DEL still fails")
				} else {
					assert.Empty(t, pods, "2.4 forgets the failed sandboxes: nothing will ever DEL their IPs")
				}
			}
		})
	}
}

// TestCRIWedgeCatenaVersusPlainConflist is multus PR 1498 through the real
// CRI: a kube-ovn-like delegate fails DEL unless its own ADD completed, and
// the first sandbox's ADD fails in that delegate. With Catena every later
// RunPodSandbox, Stop and Remove succeeds and nothing is held. As a plain
// conflist, on the same containerd:
//   - 1.6 WEDGES: it keeps the failed sandbox, whose Stop and Remove fail
//     forever, so the pod's retry cannot even reserve its name; the IP stays
//     held.
//   - 2.4 LEAKS, then WEDGES: it forgets the failed sandbox, leaking its IP;
//     the retry runs, but Remove sends a second DEL round (empty CNI_NETNS)
//     that the delegate fails, so the retried sandbox can never be removed.
func TestCRIWedgeCatenaVersusPlainConflist(t *testing.T) {
	for _, v := range []containerdVersion{containerd24(), containerd16()} {
		for _, mode := range []string{"catena", "plain conflist"} {
			t.Run(fmt.Sprintf("containerd %s %s", v.name, mode), func(t *testing.T) {
				w := newWorld(t)
				dir := t.TempDir()
				fault, stateDir, logFile := filepath.Join(dir, "fault"), filepath.Join(dir, "state"), filepath.Join(dir, "ovn.log")
				touch(t, fault)
				require.NoError(t, os.Mkdir(stateDir, 0o755))
				ovn := failer(fmt.Sprintf(`"delRequiresAdd":true,"stateDir":%q,"failAdd":true,"faultFile":%q,"logFile":%q`,
					stateDir, fault, logFile))
				net := "criwedge-" + w.id
				list := w.catenaList(net, v.cniVersion(), w.bridgeDelegate(), ovn)
				if mode != "catena" {
					list = w.plainList(net, v.cniVersion(), w.bridgeDelegate(), ovn)
				}
				d := startContainerd(t, v, string(list.Bytes))
				pod := d.podConfig("wedge", 0)

				_, err := d.runPod(pod)
				require.Error(t, err, "the delegate's ADD fails")
				require.NoError(t, os.Remove(fault), "the delegate works from now on")

				switch {
				case mode == "catena":
					assertCatenaUnwedged(t, w, d, pod, net, stateDir)
				case v.legacy:
					assertPlainWedged16(t, w, d, pod, net, stateDir)
				default:
					assertPlainLeaksThenWedges24(t, w, d, pod, net, stateDir, logFile)
				}
			})
		}
	}
}

// assertCatenaUnwedged: the failed ADD was rolled back; the retry, its Stop
// and its Remove all succeed and nothing is held.
func assertCatenaUnwedged(t *testing.T, w *world, d *containerd, pod *cri.PodSandboxConfig, net, stateDir string) {
	assert.Empty(t, d.pods(), "the failed sandbox is gone")
	assert.Empty(t, w.ipamFiles(net), "its IP was rolled back")
	assert.Empty(t, w.records(net))

	id, err := d.runPod(pod)
	require.NoError(t, err, "the retry succeeds")
	_, ip, err := d.podStatus(id)
	require.NoError(t, err)
	assert.Equal(t, []string{ip}, w.ipamFiles(net))
	require.NoError(t, d.stopPod(id))
	require.NoError(t, d.removePod(id))
	assert.Empty(t, d.pods())
	assert.Empty(t, w.ipamFiles(net), "nothing held")
	assert.Empty(t, w.records(net))
	assert.Empty(t, w.hostVeths())
	assert.Empty(t, stateFiles(t, stateDir), "the delegate holds nothing")
}

// assertPlainWedged16: 1.6 keeps the failed sandbox; Stop and Remove fail
// for good and the retry cannot reserve the pod's name. Giving the delegate
// the state it wants is what unwedges it.
func assertPlainWedged16(t *testing.T, w *world, d *containerd, pod *cri.PodSandboxConfig, net, stateDir string) {
	pods := d.pods()
	require.Len(t, pods, 1, "WEDGE: 1.6 keeps the failed sandbox")
	stuck := pods[0]
	assert.Len(t, w.ipamFiles(net), 1, "its IP stays held")
	for i := 0; i < 3; i++ {
		require.Error(t, d.stopPod(stuck), "WEDGE: Stop fails, every time")
		require.Error(t, d.removePod(stuck), "WEDGE: Remove fails, every time")
	}
	_, err := d.runPod(pod)
	require.ErrorContains(t, err, "is reserved for", "WEDGE: the pod's retry cannot run")

	// the wedge is the delegate's missing ADD state, and only that: given
	// it (again before Remove, whose DEL round comes after Stop's consumed
	// it), the sandbox goes and its IP is freed
	touch(t, filepath.Join(stateDir, stuck+"-eth0"))
	require.NoError(t, d.stopPod(stuck))
	touch(t, filepath.Join(stateDir, stuck+"-eth0"))
	require.NoError(t, d.removePod(stuck))
	assert.Empty(t, d.pods())
	assert.Empty(t, w.ipamFiles(net))
}

// assertPlainLeaksThenWedges24: 2.4 forgets the failed sandbox and leaks its
// IP; the retry runs and stops, but its Remove's second DEL round (empty
// CNI_NETNS) fails in the delegate, for good.
func assertPlainLeaksThenWedges24(t *testing.T, w *world, d *containerd, pod *cri.PodSandboxConfig, net, stateDir, logFile string) {
	assert.Empty(t, d.pods(), "2.4 forgets the failed sandbox")
	leaked := w.ipamFiles(net)
	require.Len(t, leaked, 1, "LEAK: its IP is held by nothing")

	id, err := d.runPod(pod)
	require.NoError(t, err, "the retry runs")
	require.NoError(t, d.stopPod(id), "and stops")
	assert.Equal(t, leaked, w.ipamFiles(net), "Stop freed the retry's IP, not the leaked one")
	for i := 0; i < 3; i++ {
		require.ErrorContains(t, d.removePod(id), "DEL without a prior successful ADD", "WEDGE: Remove fails, every time")
	}
	assert.Equal(t, []string{id}, d.pods())
	raw, err := os.ReadFile(logFile)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	assert.Equal(t, fmt.Sprintf("DEL %s eth0 -", id), lines[len(lines)-1], "Remove's DEL has an empty CNI_NETNS")

	touch(t, filepath.Join(stateDir, id+"-eth0"))
	require.NoError(t, d.removePod(id), "unwedged by the delegate's state")
	assert.Equal(t, leaked, w.ipamFiles(net), "the leaked IP is never freed")
}

// stateFiles lists the kube-ovn-like delegate's ADD state.
func stateFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*-eth0"))
	require.NoError(t, err)
	return m
}
