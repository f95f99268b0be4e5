package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// flannelAgentNode is an agent node on containerd 2.4 whose primary is
// kube-flannel's conflist [flannel, portmap], loaded by containerd.
func flannelAgentNode(t *testing.T) (*agentNode, *flannelNode) {
	t.Helper()
	requireFlannel(t)
	v := containerd24()
	n := newAgentNode(t, &v)
	for _, p := range []string{"flannel", "failer"} {
		require.NoError(t, os.Symlink(filepath.Join(cniPath, p), filepath.Join(n.binDir, p)))
	}
	f := flannelIn(t, n.w, n.net)
	n.writePrimary(f.conflist())
	n.waitLoaded(false)
	return n, f
}

// generatedDelegates are the types of the generated conflist's delegates.
func (n *agentNode) generatedDelegates() []string {
	n.t.Helper()
	raw, err := os.ReadFile(filepath.Join(n.confDir, generatedName))
	require.NoError(n.t, err)
	var conf struct {
		Plugins []struct {
			Type      string `json:"type"`
			Delegates []struct {
				Type string `json:"type"`
			} `json:"delegates"`
		} `json:"plugins"`
	}
	require.NoError(n.t, json.Unmarshal(raw, &conf))
	require.Len(n.t, conf.Plugins, 1)
	require.Equal(n.t, "catena", conf.Plugins[0].Type)
	var types []string
	for _, d := range conf.Plugins[0].Delegates {
		types = append(types, d.Type)
	}
	return types
}

// TestFlannelInstallAdoptsRunningPods: two sandboxes run through plain
// flannel (flannel's cache holds their files); `install --once` wraps
// [flannel, portmap] in Catena and adopts both from libcni's cache; a third
// sandbox goes through Catena. Stop and Remove of all three reach flannel's
// DEL through Catena: 0 IPs, 0 veths, 0 files in flannel's cache dir, 0
// records, 0 libcni entries. Without the adoption, the first two DELs
// would find no record, and their IPs and flannel's files would stay.
func TestFlannelInstallAdoptsRunningPods(t *testing.T) {
	n, f := flannelAgentNode(t)
	var before []string
	for range 2 {
		id, err := n.d.runPod(n.d.podConfig("flbefore", 0))
		require.NoError(t, err, n.d.logTail())
		before = append(before, id)
	}
	require.ElementsMatch(t, before, f.cacheFiles(), "plain flannel keeps one file per sandbox")
	require.Equal(t, flannelHeld{IPs: 2, Veths: 2, Files: 2}, f.held(n.w.cacheDir))

	log := n.installOnce()
	n.waitLoaded(true)
	assert.Equal(t, []string{"flannel", "portmap"}, n.generatedDelegates())
	assert.Equal(t, 2, strings.Count(log, "adopted attachment"), log)
	require.Len(t, n.w.records(n.net), 2, "both running sandboxes adopted")

	after, err := n.d.runPod(n.d.podConfig("flafter", 0))
	require.NoError(t, err, n.d.logTail())
	adds := opsFor(catenaOps(t, n.w.cacheDir), "ADD", after)
	require.Len(t, adds, 1, "the new sandbox goes through Catena")
	assert.Equal(t, []string{"flannel ADD", "portmap ADD"}, callNames(adds[0]))
	installed := f.held(n.w.cacheDir)
	assert.Equal(t, flannelHeld{IPs: 3, Veths: 3, Files: 3, Records: 3}, installed)

	n.stopRemoveAll()
	left := f.held(n.w.cacheDir)
	assert.Equal(t, flannelHeld{}, left, "nothing of the adopted or new sandboxes is left")
	for _, id := range append(before, after) {
		assert.Empty(t, libcniEntries(t, id))
		dels := opsFor(catenaOps(t, n.w.cacheDir), "DEL", id)
		require.NotEmpty(t, dels, id)
		assert.Equal(t, []string{"portmap DEL", "flannel DEL"}, callNames(dels[0]), "%s's DEL through Catena reached flannel", id)
	}
	t.Logf("flannel, install --once over 2 running sandboxes: 2 adopted, delegates %v; 1 more through Catena: %s; after Stop+Remove of 3: %s",
		n.generatedDelegates(), installed, left)
}

// TestFlannelReconcilerReclaimsLostSandboxes: two sandboxes run through
// Catena over flannel under `catena-agent run` (reconciling every 500 ms,
// 2 s grace); containerd is killed, its root and state deleted, the
// pause processes killed and their netns unpinned, as if the runtime had
// lost them, and it is restarted. The reconciler reclaims both attachments: flannel's DEL,
// from its cache file, releases each IP and veth, and removes the file.
func TestFlannelReconcilerReclaimsLostSandboxes(t *testing.T) {
	const sandboxes = 2
	n, f := flannelAgentNode(t)
	p := n.startRun(n.reconcileFlags(500*time.Millisecond, 2*time.Second)...)
	n.waitLoaded(true)
	var pauses []int
	for range sandboxes {
		id, err := n.d.runPod(n.d.podConfig("fllost", 0))
		require.NoError(t, err, n.d.logTail())
		pid := n.d.sandboxPID(id)
		pauses = append(pauses, pid)
		t.Cleanup(func() { killPause(pid) })
	}
	lost := f.held(n.w.cacheDir)
	require.Equal(t, flannelHeld{IPs: sandboxes, Veths: sandboxes, Files: sandboxes, Records: sandboxes}, lost)

	n.d.crash()
	netns := n.d.wipeRootAndState()
	for _, pid := range pauses {
		killPause(pid)
	}
	// a pinned netns with no process in it is no proof its sandbox is
	// gone (TestReconcileRuntimeStateWiped): as on a node whose runtime
	// lost them, the namespaces go too
	unpinNetns(t, netns)
	n.d.restart()
	require.Empty(t, n.d.pods(), "containerd lost the sandboxes")
	took := p.waitFor("reclaimed", time.Minute, func() (bool, string) {
		h := f.held(n.w.cacheDir)
		return h == flannelHeld{}, h.String()
	})
	reclaims := n.reclaimsCounted(p, sandboxes)
	require.Len(t, reclaims, sandboxes, "one reclaim per lost attachment")
	for _, op := range reclaims {
		assert.Equal(t, "ok", op.Outcome, "%+v", op)
		assert.Equal(t, []string{"portmap DEL", "flannel DEL"}, callNames(op))
	}
	t.Logf("flannel, containerd lost %d sandboxes (%s): reclaimed in %s by %d RECLAIMs; left: %s",
		sandboxes, lost, took.Round(time.Millisecond), len(reclaims), f.held(n.w.cacheDir))
}

// TestFlannelSubnetEnvBadInput: with a sandbox running through Catena over
// flannel under `catena-agent run`, subnet.env goes missing, then comes
// back empty, then half-written. Each time a new sandbox fails with
// flannel's message naming the file and what to do (through Catena's
// error, to the runtime), and leaves nothing (no IP, veth, flannel file or
// record); the generated conflist is neither removed nor rewritten (same
// inode and bytes), the agent stays ready, and the running sandbox still
// answers a ping. Its DEL, while the file is still missing, releases it
// (flannel's DEL reads its own file, not subnet.env); with subnet.env back
// a new sandbox starts.
func TestFlannelSubnetEnvBadInput(t *testing.T) {
	n, f := flannelAgentNode(t)
	p := n.startRun("--reconcile-interval", "0s")
	n.waitLoaded(true)
	genPath := filepath.Join(n.confDir, generatedName)
	gen, err := os.ReadFile(genPath)
	require.NoError(t, err)
	genIno := inode(t, genPath)
	running, err := n.d.runPod(n.d.podConfig("flrunning", 0))
	require.NoError(t, err, n.d.logTail())
	_, ip, err := n.d.podStatus(running)
	require.NoError(t, err)
	require.NoError(t, ping(ip, 5*time.Second))
	one := flannelHeld{IPs: 1, Veths: 1, Files: 1, Records: 1}
	require.Equal(t, one, f.held(n.w.cacheDir))

	good := f.subnetEnv()
	for _, tc := range []struct {
		name  string
		apply func()
		want  string // besides the file's path and flannel's advice
	}{
		{"missing", func() { require.NoError(t, os.Remove(f.subnetFile)) }, "no such file or directory"},
		{"empty", func() { f.writeSubnetEnv("") }, "is missing FLANNEL_NETWORK"},
		{"half-written", func() { f.writeSubnetEnv(good[:strings.Index(good, "FLANNEL_MTU")]) }, "is missing FLANNEL_MTU, FLANNEL_IPMASQ"},
	} {
		tc.apply()
		_, err := n.d.runPod(n.d.podConfig("flbad", 0))
		require.Error(t, err, tc.name)
		t.Logf("subnet.env %s: RunPodSandbox: %v", tc.name, err)
		for _, want := range []string{f.subnetFile, tc.want, "Check the flannel pod log for this node", "delegate 0 (flannel) ADD failed", "rolled back"} {
			assert.Contains(t, err.Error(), want, tc.name)
		}
		assert.Equal(t, one, f.held(n.w.cacheDir), "%s: the failed sandbox left nothing", tc.name)
		assert.Equal(t, []string{running}, f.cacheFiles())
		assert.Equal(t, []string{running}, n.d.pods())
		assert.NoError(t, ping(ip, 5*time.Second), "%s: the running sandbox still answers", tc.name)
		ready, why := p.ready()
		assert.True(t, ready, "%s: the agent stays ready: %s", tc.name, why)
	}
	time.Sleep(3 * time.Second) // longer than the agent's 2 s resync
	now, err := os.ReadFile(genPath)
	require.NoError(t, err)
	assert.Equal(t, string(gen), string(now), "the generated conflist is untouched")
	assert.Equal(t, genIno, inode(t, genPath), "and was not rewritten")

	require.NoError(t, os.Remove(f.subnetFile))
	require.NoError(t, n.d.stopPod(running), "the running sandbox's DEL needs no subnet.env")
	require.NoError(t, n.d.removePod(running))
	assert.Equal(t, flannelHeld{}, f.held(n.w.cacheDir))
	f.writeSubnetEnv(good)
	id, err := n.d.runPod(n.d.podConfig("flback", 0))
	require.NoError(t, err, "subnet.env is back: a new sandbox starts")
	assert.Equal(t, one, f.held(n.w.cacheDir))
	require.NoError(t, n.d.stopPod(id))
	require.NoError(t, n.d.removePod(id))
	assert.Equal(t, flannelHeld{}, f.held(n.w.cacheDir))
	t.Logf("flannel, subnet.env missing, empty, half-written: 3 RunPodSandbox failed naming %s, each leaving nothing; generated conflist untouched, agent ready, running sandbox answered 3 pings; its DEL without subnet.env released it; subnet.env back: a new sandbox ran",
		f.subnetFile)
}

// inode is path's inode number.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(path, &st))
	return st.Ino
}
