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
	corev1 "k8s.io/api/core/v1"

	"github.com/catena-cni/catena/node/kevents"
)

// seedFailure is containerd issue 12130 under kubelet, through Catena: the
// primary's second plugin fails ADD and DEL and kubelet retries the pod for
// retryWindow. Catena holds no IP (the plain primary held one per retry,
// measured before the install). Once the fault is lifted the pod starts
// through Catena and nothing of the failed attempts is left.
func (r *k8sRun) seedFailure(t *testing.T) {
	logFile := filepath.Join(r.n.dir, "failer-catena.log")
	r.n.writePrimary(t, r.faulty(logFile))
	r.c.waitNetwork(t, "failer") // the agent regenerated the wrapped conflist
	r.c.waitNetwork(t, "catena")
	touch(t, r.fault)
	r.c.apply(t, []any{webDeployment("seed", 1)})
	time.Sleep(retryWindow)
	held := r.n.quietState(t)
	retries := failerAdds(t, logFile)
	assert.GreaterOrEqual(t, retries, 4, "kubelet retried every 10-15 s")
	assert.Empty(t, held.IPs, "Catena holds no IP of the failed attempts")
	assert.Empty(t, held.Records, "nor any record")
	assert.Zero(t, held.Veths)
	// each failed attempt's rollback is a Warning on the pod (aggregated
	// by client-go's correlator)
	checkPodEvent(t, r.c.waitPodEvent(t, "seed", kevents.ReasonRolledBack, time.Minute), corev1.EventTypeWarning,
		"failed at delegate", "rolled back", "nothing is held")

	require.NoError(t, os.Remove(r.fault))
	start := time.Now()
	ips := r.waitRunning(t, "seed", 1)
	started := time.Since(start)
	s := r.n.state(t)
	assert.Equal(t, ips, s.IPs, "the pod's IP, and nothing of the failed attempts")
	assert.Len(t, s.Records, 1)
	assert.Equal(t, 1, s.Veths)
	assert.Len(t, r.n.sandboxes(t, "seed"), 1, "one sandbox: the failed ones are gone")

	r.n.writePrimary(t, r.n.primary())
	r.c.waitNetworkWithout(t, "failer")
	r.c.kubectl(t, nil, "delete", "deployment", "seed", "-n", "default")
	r.waitGone(t, "seed")
	r.n.waitClean(t, time.Minute)
	summary("seed failure", "%s of kubelet retries: plain primary %d retries, %d IPs held; Catena %d retries, %d IPs held, %d records; fault lifted: Running through Catena in %s, 1 IP, 1 record, 1 veth",
		retryWindow, r.plain.retries, r.plain.heldIPs, retries, len(held.IPs), len(held.Records), started.Round(time.Millisecond))
}

// kubeletRestart restarts kubelet with pods running: no new ADD, nothing
// leaked, and their later removal is clean.
func (r *k8sRun) kubeletRestart(t *testing.T) {
	r.c.scale(t, "web", 3)
	ips := r.waitRunning(t, "web", 3)
	adds := countOps(r.n.ops(t), "ADD", "")
	sandboxes := len(r.n.sandboxes(t, "web"))

	start := time.Now()
	r.n.restartKubelet(t)
	waitFor(t, "the node is Ready again", 2*time.Minute, 250*time.Millisecond, func() error {
		return r.c.nodeReady(t)
	}, r.n.kubelet)
	ready := time.Since(start)
	time.Sleep(30 * time.Second) // six of kubelet's sync periods
	assert.Equal(t, ips, r.waitRunning(t, "web", 3), "the same pods, same IPs")
	s := r.n.state(t)
	newAdds := countOps(r.n.ops(t), "ADD", "") - adds
	assert.Zero(t, newAdds, "the restarted kubelet adopted the sandboxes: no ADD")
	assert.Len(t, r.n.sandboxes(t, "web"), sandboxes)
	assert.ElementsMatch(t, ips, s.IPs, "nothing leaked")
	assert.Len(t, s.Records, 3)

	r.c.scale(t, "web", 0)
	r.waitGone(t, "web")
	clean := r.n.waitClean(t, time.Minute)
	summary("kubelet restart", "3 pods; node Ready %s after restart; %d new ADDs in 30s; %d IPs, %d records; scale to 0: clean in %s",
		ready.Round(time.Millisecond), newAdds, len(s.IPs), len(s.Records), clean.Round(time.Millisecond))
}

// uninstall is helm uninstall: the DaemonSet deleted, its agent removes
// the generated conflist as it exits (it saw its DaemonSet's deletion),
// the primary takes over untouched, catena stays in the bin dir, a new pod
// goes through the primary, and the pods created through Catena still
// tear down cleanly.
func (r *k8sRun) uninstall(t *testing.T) {
	r.c.scale(t, "web", 2)
	r.waitRunning(t, "web", 2)
	primaryBefore, err := os.ReadFile(filepath.Join(r.n.ctd.confDir, primaryName))
	require.NoError(t, err)
	catenaBefore := fileDigest(t, filepath.Join(r.n.cniBin, "catena"))
	start := time.Now()
	r.c.helmUninstall(t)
	r.waitAgentGone(t, true)
	r.c.waitNetworkWithout(t, "catena")
	restored := time.Since(start)
	primaryAfter, err := os.ReadFile(filepath.Join(r.n.ctd.confDir, primaryName))
	require.NoError(t, err)
	assert.Equal(t, string(primaryBefore), string(primaryAfter), "the primary is untouched, byte for byte")
	assert.Equal(t, catenaBefore, fileDigest(t, filepath.Join(r.n.cniBin, "catena")), "catena stays for the pods made through it")
	assert.Empty(t, strings.TrimSpace(r.c.helm(t, "list", "--namespace", "catena-system", "--short")), "no release left")

	adds := countOps(r.n.ops(t), "ADD", "")
	r.c.scale(t, "web", 3)
	ips := r.waitRunning(t, "web", 3)
	assert.Zero(t, countOps(r.n.ops(t), "ADD", "")-adds, "the new pod goes through the primary")
	left := r.n.state(t)
	assert.ElementsMatch(t, ips, left.IPs)

	r.c.scale(t, "web", 0)
	r.waitGone(t, "web")
	var s nodeState
	waitFor(t, "every pod's IP and veth is released", time.Minute, 250*time.Millisecond, func() error {
		if s = r.n.state(t); len(s.IPs)+s.Veths+len(s.Results)+s.Iptables > 0 {
			return fmt.Errorf("still %s", s)
		}
		return nil
	}, r.n.kubelet)
	summary("uninstall", "helm uninstall: the agent removed the generated conflist as it exited, primary restored in %s (untouched), catena kept; new pod through the primary; scale to 0: %d IPs, %d veths left (%d stale records of Catena-made pods remain for catenactl)",
		restored.Round(time.Millisecond), len(s.IPs), s.Veths, len(s.Records))
}
