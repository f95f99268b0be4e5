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

	"github.com/catena-cni/catena/deploy"
)

// The node switches to flannel once Catena is uninstalled: kube-flannel's
// conflist [flannel, portmap] at cniVersion 0.3.1 in 10-flannel.conflist,
// flannel's own plugin (scripts/install-flannel.sh) in the bin dir, the
// subnet.env flanneld would write (no flanneld runs on one node), and
// flannel's cache dir where a node has it, in /var/lib/cni (remapped, so
// the agent's container sees it at the same path). Catena is installed
// over it again and the scenarios run on flannel's network.

// flannelConfName is kube-flannel's conflist file.
const flannelConfName = "10-flannel.conflist"

// flannelNetName is flannel's network on the node whose world is id
// (kube-flannel names it cbr0).
func flannelNetName(id string) string { return "cbr0-" + id }

// k8sFlannel is the flannel scenarios' shared state.
type k8sFlannel struct {
	f     *flannelNode
	plain flannelSeed // the seed failure through plain flannel
	fault string      // failer's fault file
}

// flannelSeed is one half of the seed failure on flannel: kubelet's
// retries and what they left.
type flannelSeed struct {
	retries int
	held    flannelHeld
}

// newFlannel makes the node's flannel, r.fl, and writes its subnet.env;
// its conflist is written by writeFlannel.
func (r *k8sRun) newFlannel(t *testing.T) {
	t.Helper()
	n := r.n
	fl := newFlannelNode(t, n.fw, flannelNetName(n.w.id), n.fw.ipamDir,
		filepath.Join(n.cniState, "flannel"), filepath.Join(n.dir, "run-flannel", "subnet.env"))
	r.fl = &k8sFlannel{f: fl, fault: filepath.Join(n.cniState, "flannel-fault")}
}

// flannel is the flannel node for test t.
func (r *k8sRun) flannel(t *testing.T) *flannelNode { return r.fl.f.on(t) }

// flannelHeld is what the node holds of flannel's network.
func (r *k8sRun) flannelHeld(t *testing.T) flannelHeld {
	t.Helper()
	return r.flannel(t).held(r.n.cacheDir())
}

// writeFlannel (re)writes kube-flannel's conflist with extra plugins
// after flannel and waits until containerd has loaded it, with failer in
// it or not, and, once Catena is installed, wrapped.
func (r *k8sRun) writeFlannel(t *testing.T, catena bool, extra ...string) {
	t.Helper()
	fl := r.flannel(t)
	writeAtomic(t, filepath.Join(r.n.ctd.confDir, flannelConfName), []byte(fl.conflist(extra...)))
	r.c.waitNetworkOf(t, fl.net, "failer", len(extra) > 0)
	r.c.waitNetworkOf(t, fl.net, "catena", catena)
}

// faultyFlannel is failer after flannel, failing ADD and DEL while the
// fault file exists, logging to logFile.
func (r *k8sRun) faultyFlannel(logFile string) string {
	return failer(fmt.Sprintf(`"failAdd":true,"failDel":true,"faultFile":%q,"logFile":%q`, r.fl.fault, logFile))
}

// flannelRetry runs a one-pod Deployment named app while the fault holds,
// for retryWindow of kubelet's retries.
func (r *k8sRun) flannelRetry(t *testing.T, app string) {
	t.Helper()
	touch(t, r.fl.fault)
	r.c.apply(t, []any{webDeployment(app, 1)})
	time.Sleep(retryWindow)
	pods := r.c.pods(t, "default", "app="+app)
	require.Len(t, pods, 1)
	assert.NotEqual(t, corev1.PodRunning, pods[0].Status.Phase, "the pod cannot start while the fault holds")
}

// flannelQuiet is the fewest held over 20 s of samples between kubelet's
// retries (an attempt in flight holds an IP and a file for a moment; a
// leak stays in every sample).
func (r *k8sRun) flannelQuiet(t *testing.T) flannelHeld {
	t.Helper()
	sum := func(h flannelHeld) int { return h.IPs + h.Veths + h.Files + h.Records }
	best := r.flannelHeld(t)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && sum(best) > 0; time.Sleep(200 * time.Millisecond) {
		if h := r.flannelHeld(t); sum(h) < sum(best) {
			best = h
		}
	}
	return best
}

// waitFlannelClean waits until the node holds nothing of flannel's
// network (IPs, veths, flannel's files, records, libcni entries).
func (r *k8sRun) waitFlannelClean(t *testing.T, limit time.Duration) time.Duration {
	t.Helper()
	net := r.fl.f.net
	return waitFor(t, "the node holds nothing of network "+net, limit, 250*time.Millisecond, func() error {
		results, err := filepath.Glob(filepath.Join(libcniResults, net+"-*"))
		if err != nil {
			return err
		}
		if h := r.flannelHeld(t); h != (flannelHeld{}) || len(results) > 0 {
			return fmt.Errorf("still %s, %d libcni entries", h, len(results))
		}
		return nil
	}, r.n.kubelet)
}

// flannelPlain switches the node to flannel (Catena is uninstalled): a
// Deployment of 2 runs through plain flannel, then the seed failure's
// control half there: failer after flannel fails ADD and DEL, and each of
// kubelet's retries leaks an IP and a file in flannel's cache dir,
// flannel's DEL never being reached. The leaks are released by hand.
func (r *k8sRun) flannelPlain(t *testing.T) {
	r.newFlannel(t)
	fl := r.fl.f
	r.writeFlannel(t, false) // sorts first: containerd loads it at once
	require.NoError(t, os.Remove(filepath.Join(r.n.ctd.confDir, primaryName)))
	r.c.apply(t, []any{webDeployment("fweb", 2)})
	ips := r.waitRunning(t, "fweb", 2)
	two := flannelHeld{IPs: 2, Veths: 2, Files: 2}
	require.Equal(t, two, r.flannelHeld(t))
	web := fl.on(t).cacheFiles()

	logFile := filepath.Join(r.n.dir, "failer-flannel-plain.log")
	r.writeFlannel(t, false, r.faultyFlannel(logFile))
	r.flannelRetry(t, "fseed-plain")
	r.c.kubectl(t, nil, "delete", "deployment", "fseed-plain", "-n", "default")
	r.waitGone(t, "fseed-plain")
	seed := flannelSeed{retries: failerAdds(t, logFile), held: r.flannelHeld(t)}
	seed.held.IPs -= 2
	seed.held.Veths -= 2
	seed.held.Files -= 2
	r.fl.plain = seed
	assert.GreaterOrEqual(t, seed.retries, 3, "kubelet retried every 10-15 s")
	assert.Equal(t, seed.retries, seed.held.IPs, "LEAK: plain flannel holds one IP per retry")
	assert.Equal(t, seed.retries, seed.held.Files, "LEAK: and one file in its cache dir")

	// nothing holds them: release them by hand, and lift the fault
	f := fl.on(t)
	for _, ip := range f.ips() {
		if !slices.Contains(ips, ip) {
			require.NoError(t, os.Remove(filepath.Join(f.ipamDir, f.net, ip)))
		}
	}
	for _, id := range f.cacheFiles() {
		if !slices.Contains(web, id) {
			require.NoError(t, os.Remove(filepath.Join(f.dataDir, id)))
		}
	}
	require.NoError(t, os.Remove(r.fl.fault))
	r.writeFlannel(t, false)
	require.Equal(t, two, r.flannelHeld(t))
	summary("flannel plain", "kube-flannel's conflist (0.3.1, [flannel, portmap]): Deployment of 2 Running; seed failure for %s: %d kubelet retries; the pod deleted, %d IPs and %d flannel files held",
		retryWindow, seed.retries, seed.held.IPs, seed.held.Files)
}

// flannelInstall applies deploy/catena.yaml again over the running
// flannel node: flannel's conflist is wrapped, [flannel, portmap], and its
// 2 pods are adopted; their deletion then goes through Catena to flannel's
// DEL, which leaves nothing: 0 IPs, veths, files in flannel's cache dir.
// The ConfigMap's reconciler settings are shortened for the reconciler
// scenario below (a pass every 10 s, 30 s grace).
func (r *k8sRun) flannelInstall(t *testing.T) {
	fl := r.flannel(t)
	web := fl.cacheFiles()
	objs := r.c.agentManifest(t, deploy.CatenaYAML, r.tag)
	for _, o := range objs {
		if cm, ok := o.(*corev1.ConfigMap); ok && cm.Name == "catena-options" {
			cm.Data["CATENA_AGENT_RECONCILE_INTERVAL"], cm.Data["CATENA_AGENT_GRACE"] = "10s", "30s"
		}
	}
	start := time.Now()
	r.c.apply(t, objs)
	r.waitAgentReady(t, r.tag)
	r.c.waitNetworkOf(t, fl.net, "catena", true)
	wrapped := time.Since(start)
	gen := r.n.generated(t)
	assert.Equal(t, fl.net, gen["name"])
	assert.Equal(t, "0.3.1", gen["cniVersion"])
	plugins, _ := gen["plugins"].([]any)
	require.Len(t, plugins, 1)
	delegates, _ := plugins[0].(map[string]any)["delegates"].([]any)
	var types []string
	for _, d := range delegates {
		types = append(types, fmt.Sprint(d.(map[string]any)["type"]))
	}
	assert.Equal(t, []string{"flannel", "portmap"}, types)
	waitFor(t, "both flannel pods are adopted", time.Minute, 250*time.Millisecond, func() error {
		if h := r.flannelHeld(t); h.Records != 2 {
			return fmt.Errorf("%s", h)
		}
		return nil
	}, r.n.kubelet)
	adopted := sampleSum(scrapeMetrics(t, agentMetricsURL), "catena_adoptions_total", "result=adopted")
	assert.Equal(t, 2.0, adopted, "the agent's metrics count both")

	deleted := time.Now()
	r.c.kubectl(t, nil, "delete", "deployment", "fweb", "-n", "default")
	r.waitGone(t, "fweb")
	r.waitFlannelClean(t, 2*time.Minute)
	clean := time.Since(deleted)
	for _, id := range web {
		dels := opsFor(r.n.ops(t), "DEL", id)
		require.NotEmpty(t, dels, "kubelet's DEL of %s went through Catena", id)
		assert.Equal(t, "ok", dels[0].Outcome)
		assert.Equal(t, []string{"portmap DEL", "flannel DEL"}, callNames(dels[0]))
	}
	summary("flannel install", "kubectl apply over 2 flannel pods: wrapped [%s] at %s, %g adopted; Deployment deleted: DELs through Catena reached flannel, %s at %s",
		strings.Join(types, ", "), wrapped.Round(time.Millisecond), adopted, r.flannelHeld(t), clean.Round(time.Millisecond))
}
