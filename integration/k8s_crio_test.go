package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/catena-cni/catena/node/kevents"
)

// crioScenarios are the scenarios on the CRI-O node, in order, by the
// names CATENA_K8S_SCENARIOS selects them with ("crio" selects them all).
var crioScenarios = []string{"crio plain primary", "crio install", "crio uninstall", "crio density"}

// crioRetryWindow is how long kubelet retries a seed failure's pod on the
// CRI-O node: its retries are 10-15 s apart, so at least 3 of them, and
// one IP leaked by each through a plain conflist.
const crioRetryWindow = 45 * time.Second

// crio brings up the CRI-O node beside the containerd node, on the same
// control plane, runs the selected CRI-O scenarios on it, and tears it
// down (its cleanups) before the next scenario. No agent may run on the
// host meanwhile: the CRI-O node's binds the same ports.
func (r *k8sRun) crio(t *testing.T) {
	require.Empty(t, r.c.pods(t, "catena-system", "app.kubernetes.io/component=agent"),
		"no agent runs on the containerd node (the uninstall scenario removed it)")
	n, tm := r.c.startCRIONode(t)
	summary("crio bring-up", "CRI-O with the pause and Catena's images loaded and the primary found %s, node %s Ready %s",
		tm.crio.Round(time.Millisecond), n.name, tm.ready.Round(time.Millisecond))
	cr := &k8sRun{c: r.c, n: n, tag: r.tag, fault: filepath.Join(n.cniState, "fault")}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(n.podLogs("catena-system"))
			t.Log(n.crio.logTail())
		}
	})
	for i, fn := range []func(t *testing.T){cr.crioPlainPrimary, cr.crioInstall, cr.crioUninstall, cr.densityOnCRIO} {
		name := crioScenarios[i]
		if !inGroupSelected("crio", name) {
			continue
		}
		if !t.Run(strings.TrimPrefix(name, "crio "), fn) {
			t.FailNow()
		}
	}
}

// crioPlainPrimary starts a Deployment of 2 through the CRI-O node's plain
// primary, and the seed failure's control half there: a plugin after
// bridge fails ADD and DEL under kubelet's retries, and each retry leaks
// an IP (CRI-O's DEL after the failed ADD stops at the failing plugin).
func (r *k8sRun) crioPlainPrimary(t *testing.T) {
	r.c.apply(t, []any{r.webDeployment("cweb", 2)})
	ips := r.waitRunning(t, "cweb", 2)
	s := r.n.state(t)
	require.ElementsMatch(t, ips, s.IPs, "each pod holds its IP")
	require.Empty(t, s.Records, "no Catena yet")
	require.ElementsMatch(t, sandboxIDs(r.n.sandboxes(t, "cweb")), s.Results, "CRI-O cached both pods' results")

	r.plain = r.plainSeedFailure(t, "cseed-plain", crioRetryWindow, 3, ips)
	summary("crio plain primary", "kubelet on CRI-O: Deployment of 2 Running; seed failure for %s: %d kubelet retries, %d IPs held",
		crioRetryWindow, r.plain.retries, r.plain.heldIPs)
}

// crioInstall installs the Helm chart on the CRI-O node (the agent
// pointed at CRI-O's socket, a reconcile pass every 5 s, 15 s grace): the
// primary is wrapped and the 2 running pods adopted. The adopted pods are
// deleted: CRI-O DELs with the config it cached at their ADD, the
// primary's, so their records stay, and the agent, listing CRI-O's
// sandboxes, marks and reclaims them. The Deployment grows to 4 through
// Catena. Meanwhile, the seed failure through Catena under kubelet's
// retries (for crioRetryWindow, and until the reclaim is seen) holds no
// IP; once the fault is lifted the pod starts.
func (r *k8sRun) crioInstall(t *testing.T) {
	before := r.n.state(t)
	require.Len(t, before.Results, 2, "the plain primary's 2 pods")
	adopted := before.Results
	start := time.Now()
	r.c.helmInstall(t, r.n, r.tag, "reconcile.interval=5s", "reconcile.grace=15s")
	ready := r.waitAgentReady(t, r.tag)
	r.n.waitNetwork(t, "catena")
	wrapped := time.Since(start)
	gen := r.n.generated(t)
	plugins, _ := gen["plugins"].([]any)
	require.Len(t, plugins, 1)
	delegates, _ := plugins[0].(map[string]any)["delegates"].([]any)
	assert.Len(t, delegates, 3, "bridge, portmap, tuning")
	assert.Equal(t, r.n.net, gen["name"], "the primary's name is kept")
	assert.Equal(t, adopted, r.n.state(t).Records, "both running pods are adopted")

	// the adopted pods deleted, and the Deployment grown to 4: 4 pods
	// through Catena
	adds := countOps(r.n.ops(t), "ADD", "ok")
	var names []string
	for _, sb := range r.n.sandboxes(t, "cweb") {
		if slices.Contains(adopted, sb.Id) {
			names = append(names, sb.Metadata.Name)
		}
	}
	require.Len(t, names, 2)
	deleted := time.Now()
	r.c.kubectl(t, nil, append([]string{"delete", "pod", "-n", "default"}, names...)...) // waits until they are gone
	r.c.scale(t, "cweb", 4)
	ips := r.waitRunning(t, "cweb", 4)
	for _, ip := range before.IPs {
		require.NotContains(t, ips, ip, "the adopted pods are gone")
	}
	newAdds := countOps(r.n.ops(t), "ADD", "ok") - adds
	assert.Equal(t, 4, newAdds, "the 4 new pods' ADDs went through Catena")
	s := r.n.state(t)
	assert.ElementsMatch(t, ips, s.IPs, "the adopted pods' IPs are released (by the primary's DEL)")

	// the seed failure through Catena, while the agent reclaims
	logFile := filepath.Join(r.n.dir, "failer-catena.log")
	r.n.writePrimary(t, r.faulty(logFile))
	r.n.waitNetwork(t, "failer") // the agent regenerated the wrapped conflist
	r.n.waitNetwork(t, "catena")
	touch(t, r.fault)
	seeded := time.Now()
	r.c.apply(t, []any{r.webDeployment("cseed", 1)})
	time.Sleep(crioRetryWindow)
	reclaimed := waitFor(t, "the agent reclaimed the deleted adopted pods' records", 2*time.Minute, time.Second, func() error {
		if left := slices.DeleteFunc(r.n.state(t).Records, func(id string) bool { return !slices.Contains(adopted, id) }); len(left) > 0 {
			return fmt.Errorf("%d adopted records left", len(left))
		}
		return nil
	}, r.n.kubelet) + time.Since(deleted)
	held := r.n.quietStateBeside(t, 4)
	retries, retried := failerAdds(t, logFile), time.Since(seeded)
	assert.GreaterOrEqual(t, retries, 3, "kubelet retried every 10-15 s")
	assert.ElementsMatch(t, ips, held.IPs, "Catena holds no IP of the failed attempts: the 4 pods' only")
	assert.Len(t, held.Records, 4, "nor any record")
	assert.Equal(t, 4, held.Veths)
	checkPodEvent(t, r.c.waitPodEventOn(t, r.n.name, "cseed", kevents.ReasonRolledBack, time.Minute), corev1.EventTypeWarning,
		"failed at delegate", "rolled back", "nothing is held")
	reclaims := r.n.reclaimsOf(t, adopted, 2)
	assert.Len(t, reclaims, 2, "each adopted record reclaimed once, by the agent")
	assert.Equal(t, 2, countOps(reclaims, "RECLAIM", "ok"), "%+v", reclaims)
	for _, op := range r.n.ops(t) {
		if op.Verb == "DEL" && slices.ContainsFunc(adopted, func(id string) bool { return strings.Contains(op.Attachment, id) }) {
			t.Errorf("CRI-O's DEL of an adopted pod went to the primary: %+v", op)
		}
	}
	m := scrapeMetrics(t, agentMetricsURL)
	passes, runtimeErrors := sampleSum(m, "catena_reconcile_passes_total"), sampleSum(m, "catena_reconcile_runtime_errors_total")
	assert.Positive(t, passes)
	assert.Zero(t, runtimeErrors, "every pass listed CRI-O's sandboxes")

	require.NoError(t, os.Remove(r.fault))
	lifted := time.Now()
	seedIPs := r.waitRunning(t, "cseed", 1)
	started := time.Since(lifted)
	s = r.n.state(t)
	assert.ElementsMatch(t, append(ips, seedIPs...), s.IPs, "the pod's IP, and nothing of the failed attempts")
	assert.Len(t, s.Records, 5)
	assert.Equal(t, 5, s.Veths)
	assert.Len(t, r.n.sandboxes(t, "cseed"), 1, "one sandbox: the failed ones are gone")

	r.n.writePrimary(t, r.n.primary())
	r.n.waitNetworkWithout(t, "failer")
	r.c.kubectl(t, nil, "delete", "deployment", "cseed", "-n", "default")
	r.waitGone(t, "cseed")
	summary("crio install", "agent pod Ready %s after helm install, primary wrapped (%d delegates) at %s, 2 pods adopted; adopted pods deleted (CRI-O's DEL went to the primary): "+
		"records reclaimed by the agent %s later (%d RECLAIMs, %g passes, %g runtime errors); 4 ADDs through Catena, 4 IPs, 4 records; "+
		"seed failure: plain %d retries in %s, %d IPs held; Catena %d retries in %s, %d IPs held beside the 4 pods' (%d records, %d veths); fault lifted: Running through Catena in %s",
		ready.Round(time.Millisecond), len(delegates), wrapped.Round(time.Millisecond), reclaimed.Round(time.Second), len(reclaims), passes, runtimeErrors,
		r.plain.retries, crioRetryWindow, r.plain.heldIPs, retries, retried.Round(time.Second), len(held.IPs)-len(ips), len(held.Records), held.Veths, started.Round(time.Millisecond))
}

// crioUninstall is helm uninstall on the CRI-O node: the agent removes
// the generated conflist as it exits, which restores the primary: a new
// pod goes through the primary, and the pods made through Catena still
// tear down through it (CRI-O DELs with the config cached at their ADD):
// nothing is left, not a record.
func (r *k8sRun) crioUninstall(t *testing.T) {
	made := sandboxIDs(r.n.sandboxes(t, "cweb"))
	require.Len(t, made, 4, "the 4 pods made through Catena")
	primaryBefore, err := os.ReadFile(filepath.Join(r.n.confDir(), primaryName))
	require.NoError(t, err)
	start := time.Now()
	r.c.helmUninstall(t)
	r.waitAgentGone(t, true)
	r.n.waitNetworkWithout(t, "catena")
	restored := time.Since(start)
	primaryAfter, err := os.ReadFile(filepath.Join(r.n.confDir(), primaryName))
	require.NoError(t, err)
	assert.Equal(t, string(primaryBefore), string(primaryAfter), "the primary is untouched, byte for byte")

	adds := countOps(r.n.ops(t), "ADD", "")
	r.c.scale(t, "cweb", 5)
	r.waitRunning(t, "cweb", 5)
	assert.Zero(t, countOps(r.n.ops(t), "ADD", "")-adds, "the new pod goes through the primary")
	assert.Len(t, r.n.state(t).Records, 4)

	ops := len(r.n.ops(t))
	r.c.scale(t, "cweb", 0)
	r.waitGone(t, "cweb")
	clean := r.n.waitClean(t, time.Minute)
	dels := map[string]bool{}
	for _, op := range r.n.ops(t)[ops:] {
		for _, id := range made {
			if op.Verb == "DEL" && op.Outcome == "ok" && strings.Contains(op.Attachment, id) {
				dels[id] = true
			}
		}
	}
	assert.Len(t, dels, len(made), "each pod made through Catena torn down through it")
	summary("crio uninstall", "helm uninstall: the agent removed the generated conflist, primary restored in %s (untouched); new pod through the primary; scale to 0: %d of %d pods made through Catena torn down through it (CRI-O's cached config), nothing left (%s) in %s",
		restored.Round(time.Millisecond), len(dels), len(made), r.n.state(t), clean.Round(time.Millisecond))
}
