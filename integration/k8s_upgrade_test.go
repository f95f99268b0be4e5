package integration

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	corev1 "k8s.io/api/core/v1"
)

// upgradeTag is the image tag the DaemonSet is rolled to.
const upgradeTag = "it-upgrade"

// buildUpgradeImage builds catena, catenactl and catena-agent again, but
// different by content (with their symbol tables), and their image tagged
// upgradeTag with scripts/image.sh; it returns the archive and the new
// catena's digest.
func buildUpgradeImage(t *testing.T, dir string) (string, [32]byte) {
	t.Helper()
	bins := filepath.Join(dir, "upgrade-bin")
	for b, pkg := range map[string]string{"catena": "./plugins/catena", "catenactl": "./cmd/catenactl", "catena-agent": "./cmd/catena-agent"} {
		cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(bins, b), pkg)
		cmd.Dir = repoRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "building %s: %s", pkg, out)
	}
	archive := filepath.Join(dir, "upgrade-image.tar")
	cmd := exec.Command("bash", filepath.Join(repoRoot(), "scripts", "image.sh"))
	cmd.Env = append(os.Environ(), "IMAGE_VERSION="+upgradeTag, "IMAGE_BIN_DIR="+bins, "IMAGE_ARCHIVE="+archive)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "scripts/image.sh: %s", out)
	return archive, fileDigest(t, filepath.Join(bins, "catena"))
}

func fileDigest(t *testing.T, path string) [32]byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	return sha256.Sum256(raw)
}

// rolloutWatch polls, as fast as it can, what a pod started during a
// rollout depends on: the generated conflist (there and valid every time)
// and catena in the bin dir (always the old or the new binary, whole).
type rolloutWatch struct {
	polls, conflistMissing, conflistInvalid, binaryTorn int
	inodes                                              map[uint64]bool
}

func (n *k8sNode) watchRollout(oldCatena, newCatena [32]byte, stop <-chan struct{}) *rolloutWatch {
	w := &rolloutWatch{inodes: map[uint64]bool{}}
	conf, bin := filepath.Join(n.ctd.confDir, generatedName), filepath.Join(n.cniBin, "catena")
	for {
		select {
		case <-stop:
			return w
		default:
		}
		w.polls++
		raw, err := os.ReadFile(conf)
		var v map[string]any
		switch {
		case err != nil:
			w.conflistMissing++
		case json.Unmarshal(raw, &v) != nil:
			w.conflistInvalid++
		}
		raw, err = os.ReadFile(bin)
		if sum := sha256.Sum256(raw); err != nil || (sum != oldCatena && sum != newCatena) {
			w.binaryTorn++
		}
		var st syscall.Stat_t
		if syscall.Stat(bin, &st) == nil {
			w.inodes[st.Ino] = true
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// upgrade runs helm upgrade twice while one pod pings another every
// 100 ms: a changed value (the reconcile interval) rolls the agent, which
// reads it at start; then a new image tag: catena is replaced atomically,
// the conflist never disappears, pods created during the rollout go
// through Catena, and the pinging pod loses nothing through either.
func (r *k8sRun) upgrade(t *testing.T) {
	r.c.scale(t, "web", 2)
	pair := r.waitRunning(t, "web", 2)
	archive, newCatena := buildUpgradeImage(t, r.n.dir)
	r.upgradeArchive = archive
	r.n.importImage(t, archive)
	oldCatena := fileDigest(t, filepath.Join(r.n.cniBin, "catena"))
	require.NotEqual(t, oldCatena, newCatena, "the upgrade's catena differs")
	adds := countOps(r.n.ops(t), "ADD", "ok")

	stopPing := startPingStream(t, podNetns(t, r.n.netnsDir(), pair[0]), pair[1], 100*time.Millisecond)
	t.Cleanup(func() { stopPing() })
	stop := make(chan struct{})
	var watch *rolloutWatch
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); watch = r.n.watchRollout(oldCatena, newCatena, stop) }()

	oldPod := r.agentPodUID(t)
	start := time.Now()
	r.c.helmUpgrade(t, "reconcile.interval=20s")
	waitFor(t, "helm upgrade of a value rolls the agent", 2*time.Minute, 250*time.Millisecond, func() error {
		if uid := r.agentPodUID(t); uid == oldPod || uid == "" {
			return fmt.Errorf("agent pod %q not replaced yet", uid)
		}
		return nil
	}, r.n.kubelet)
	r.waitAgentReady(t, r.tag)
	valueRolled := time.Since(start)
	var cm corev1.ConfigMap
	require.NoError(t, r.c.getJSON(&cm, "configmap", "-n", "catena-system", "catena-options"))
	assert.Equal(t, "20s", cm.Data["CATENA_AGENT_RECONCILE_INTERVAL"])

	start = time.Now()
	// The interval back as it was, for the scenarios after.
	r.c.helmUpgrade(t, "image.tag="+upgradeTag, "reconcile.interval=30s")
	r.c.scale(t, "web", 5) // pods created during the rollout
	rolled := r.waitAgentReady(t, upgradeTag)
	waitFor(t, "the new catena is in the bin dir", time.Minute, 100*time.Millisecond, func() error {
		if fileDigest(t, filepath.Join(r.n.cniBin, "catena")) != newCatena {
			return fmt.Errorf("catena not replaced yet")
		}
		return nil
	}, r.n.kubelet)
	replaced := time.Since(start)
	ips := r.waitRunning(t, "web", 5)
	close(stop)
	wg.Wait()
	pings := stopPing()
	assert.Positive(t, pings.sent)
	assert.Zero(t, pings.lost, "the pinging pod loses nothing through either upgrade: %s", pings)

	assert.Zero(t, watch.conflistMissing, "the conflist never disappears: a rollout leaves it")
	assert.Zero(t, watch.conflistInvalid, "nor is ever half-written")
	assert.Zero(t, watch.binaryTorn, "catena is always one binary or the other, whole")
	assert.Len(t, watch.inodes, 2, "catena was replaced once, by a rename")
	s := r.n.state(t)
	newAdds := countOps(r.n.ops(t), "ADD", "ok") - adds
	assert.Equal(t, 3, newAdds, "the 3 pods created during the rollout went through Catena")
	assert.Len(t, s.Records, 5)
	assert.ElementsMatch(t, ips, s.IPs)

	r.c.scale(t, "web", 0)
	r.waitGone(t, "web")
	r.n.waitClean(t, time.Minute)
	summary("upgrade", "helm upgrade of reconcile.interval: agent rolled and Ready in %s; helm upgrade to %s: agent Ready %s, catena replaced at %s; %d polls: conflist missing %d, invalid %d, catena torn %d; %d pods created during the rollout, %d ADDs through Catena; pod to pod through both: %s",
		valueRolled.Round(time.Millisecond), upgradeTag, rolled.Round(time.Millisecond), replaced.Round(time.Millisecond), watch.polls,
		watch.conflistMissing, watch.conflistInvalid, watch.binaryTorn, 3, newAdds, pings)
}

// agentPodUID is the UID of the DaemonSet's pod not being deleted, or "".
func (r *k8sRun) agentPodUID(t *testing.T) string {
	t.Helper()
	for _, p := range r.c.pods(t, "catena-system", "app.kubernetes.io/component=agent") {
		if p.DeletionTimestamp == nil {
			return string(p.UID)
		}
	}
	return ""
}
