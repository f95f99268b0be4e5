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
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/catena-cni/catena/tools/nodebench"
)

// retryWindow is how long kubelet retries a seed failure's pod, the plain
// primary's, Catena's and flannel's: each retry is 10-15 s apart (kubelet's
// 10 s back-off with its 50% jitter), so at least 4 retries, the first a
// few seconds in and the fourth by 50 s, and one IP leaked by each
// through a plain conflist.
const retryWindow = 60 * time.Second

// k8sRun is the state the scenarios share on one bring-up.
type k8sRun struct {
	c     *k8sCluster
	n     *k8sNode
	tag   string // the image tag `make image` built
	plain seedFigures
	// fault is failer's fault file: the fault holds while it exists. It is
	// in the remapped /var/lib/cni, where the agent's container sees it at
	// the same path, for the delegates the agent runs.
	fault string
	// upgradeArchive is the image the DaemonSet is rolled to, kept to be
	// imported again when containerd loses its state
	upgradeArchive string
	adopted        float64 // catena_adoptions_total{result="adopted"} after the install
	// the reconciler scenario's: when its marks were first seen on disk,
	// and the agent that reclaimed them
	marked       time.Time
	reclaimAgent agentStatus
	// forgottenHeld is how many records the forgotten teardowns held
	forgottenHeld int
	// fl is the flannel scenarios' (k8s_flannel_test.go)
	fl *k8sFlannel
	// plainLeaks are the IPs the plain primary's seed failure leaked,
	// left for the leaks scenario to find and release; nil when it does
	// not run (they are freed by hand then).
	plainLeaks []string
	keepLeaks  bool
	// densityCatena is the node density scenario's last round through
	// Catena on the containerd node: the agent-up baseline of agent off
	// the path
	densityCatena *nodebench.Round
}

// seedFigures are one half of the seed failure: kubelet's retries and what
// they left.
type seedFigures struct {
	retries, heldIPs, records int
}

// TestKubernetesNode runs Catena on a real cluster: helm install of the
// chart (the node's private dirs, image tag, nodeSelector and the API
// server's address as values, nothing else), its ServiceMonitor and
// PrometheusRule checked against the Prometheus Operator's CRDs, the
// plain primary's leaks found and released from the agent's pod, pods through Catena
// under kubelet, the seed failure under kubelet's retries, a kubelet
// restart, helm upgrades of a value and the image, the reconciler after a wiped
// containerd, a forgotten teardown healed with no runtime, the agent's
// metrics, its traces in a Jaeger and the uninstall; then a second node on the same control plane,
// kubelet driving CRI-O (k8s_crio_test.go), with its plain primary, Catena
// installed and uninstalled there, the node removed after; then the
// containerd node switched to flannel's own plugin, Catena installed over
// it again (its ConfigMap's reconcile interval and grace shortened), and
// flannel's seed failure, a crash, the reconciler, a missing subnet.env
// and the API server stopped for a minute during pod churn
// (k8s_outage_test.go); the node-density benchmark at its smallest, a
// round of flannel alone and one of Catena over it with 3 pods
// (k8s_density_test.go); the agent stopped and OOM-killed while pods
// start (k8s_offpath_test.go); the node rebooted under
// its pods (k8s_restart_test.go); last, a 5-minute chaos soak on flannel's network
// (k8s_soak_test.go); in one bring-up. Each scenario prints a K8S-SUMMARY
// line with its figures; the host is checked at the end.
func TestKubernetesNode(t *testing.T) {
	c, tm := startK8sCluster(t)
	summary("bring-up", "API server ready %s, node Ready %s, default ServiceAccount %s",
		tm.apiReady.Round(time.Millisecond), tm.nodeReady.Round(time.Millisecond), tm.serviceAccount.Round(time.Millisecond))
	r := &k8sRun{c: c, n: c.node, tag: imageTag(t), fault: filepath.Join(c.node.cniState, "fault"), keepLeaks: scenarioSelected("leaks")}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.node.podLogs("catena-system"))
		}
	})
	for _, s := range []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"plain primary", r.plainPrimary},
		{"install", r.install},
		{"monitoring objects", r.monitoringObjects},
		{"leaks", r.leaks},
		{"pods through catena", r.podsThroughCatena},
		{"seed failure", r.seedFailure},
		{"kubelet restart", r.kubeletRestart},
		{"upgrade", r.upgrade},
		{"reconciler under kubelet", r.reconcilerUnderKubelet},
		{"forgotten teardown", r.forgottenTeardown},
		{"metrics", r.metrics},
		{"traces", r.traces},
		{"secure scrape", r.secureScrape},
		{"uninstall", r.uninstall},
		{"crio", r.crio},
		{"flannel plain", r.flannelPlain},
		{"flannel install", r.flannelInstall},
		{"flannel seed failure", r.flannelSeedFailure},
		{"flannel crash", r.flannelCrash},
		{"flannel reconciler", r.flannelReconciler},
		{"flannel subnet.env", r.flannelSubnetEnvMissing},
		{"api server outage", r.apiServerOutage},
		{"node density", r.nodeDensity},
		{"agent off the path", r.agentOffPath},
		{"node restart", r.nodeRestart},
		{"soak", r.soak},
	} {
		if !scenarioSelected(s.name) {
			continue
		}
		if !t.Run(s.name, s.fn) {
			t.FailNow()
		}
	}
}

// k8sScenariosEnv names the scenarios to run, comma-separated, in their
// order here (make soak runs "soak" alone, make bench-node "node
// density"); unset, every scenario runs.
const k8sScenariosEnv = "CATENA_K8S_SCENARIOS"

func scenarioSelected(name string) bool {
	v := os.Getenv(k8sScenariosEnv)
	if v == "" {
		return true
	}
	names := strings.Split(v, ",")
	return slices.Contains(names, name) ||
		slices.ContainsFunc(scenarioGroups[name], func(s string) bool { return slices.Contains(names, s) })
}

// scenarioGroups are the scenarios run inside another, by its name: the
// group runs when one of them is selected, and runs the selected ones; the
// group's own name selects all of them.
var scenarioGroups = map[string][]string{"crio": crioScenarios}

// inGroupSelected tells whether scenario name of group runs.
func inGroupSelected(group, name string) bool {
	v := os.Getenv(k8sScenariosEnv)
	return v == "" || slices.Contains(strings.Split(v, ","), group) || slices.Contains(strings.Split(v, ","), name)
}

// imageTag is the tag of the image `make image` built (bin/catena-image.ref).
func imageTag(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(binDirOf(t), "catena-image.ref"))
	require.NoError(t, err, "run `make image`")
	_, tag, ok := strings.Cut(strings.TrimSpace(string(raw)), ":")
	require.True(t, ok, "catena-image.ref %q has a tag", raw)
	return tag
}

// webDeployment is the workload (webDeployment), its pods pinned to the
// run's node.
func (r *k8sRun) webDeployment(name string, replicas int32) *appsv1.Deployment {
	d := webDeployment(name, replicas)
	d.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": r.n.name}
	return d
}

// waitRunning waits until the Deployment app has exactly want pods, all
// Running with an IP, and returns their IPs.
func (r *k8sRun) waitRunning(t *testing.T, app string, want int) []string {
	t.Helper()
	return r.waitRunningWithin(t, app, want, 2*time.Minute)
}

// waitRunningWithin is waitRunning within limit (many pods take longer).
func (r *k8sRun) waitRunningWithin(t *testing.T, app string, want int, limit time.Duration) []string {
	t.Helper()
	var ips []string
	waitFor(t, fmt.Sprintf("%d pods of %s are Running", want, app), limit, 250*time.Millisecond, func() error {
		pods := r.c.pods(t, "default", "app="+app)
		var err error
		if ips, err = runningIPs(pods); err != nil {
			return err
		}
		if len(pods) != want {
			return fmt.Errorf("%d pods, not %d", len(pods), want)
		}
		return nil
	}, r.n.kubelet)
	return ips
}

// waitGone waits until no pod of app is left in the API.
func (r *k8sRun) waitGone(t *testing.T, app string) {
	t.Helper()
	waitFor(t, "no pod of "+app+" is left", 2*time.Minute, 250*time.Millisecond, func() error {
		if pods := r.c.pods(t, "default", "app="+app); len(pods) > 0 {
			return fmt.Errorf("%d pods of %s left", len(pods), app)
		}
		return nil
	}, r.n.kubelet)
}

// faulty is the primary with failer after bridge, failing ADD and DEL
// while the fault file exists (containerd issue 12130), logging to logFile.
func (r *k8sRun) faulty(logFile string) string {
	return r.n.primary(failer(fmt.Sprintf(`"failAdd":true,"failDel":true,"faultFile":%q,"logFile":%q`, r.fault, logFile)))
}

// retrySeed runs a one-pod Deployment named app on the node while the
// fault holds, for window of kubelet's retries, deletes it and returns the
// figures.
func (r *k8sRun) retrySeed(t *testing.T, app, logFile string, window time.Duration) seedFigures {
	t.Helper()
	touch(t, r.fault)
	r.c.apply(t, []any{r.webDeployment(app, 1)})
	time.Sleep(window)
	pods := r.c.pods(t, "default", "app="+app)
	require.Len(t, pods, 1)
	assert.NotEqual(t, corev1.PodRunning, pods[0].Status.Phase, "the pod cannot start while the fault holds")
	r.c.kubectl(t, nil, "delete", "deployment", app, "-n", "default")
	r.waitGone(t, app)
	s := r.n.state(t)
	return seedFigures{retries: failerAdds(t, logFile), heldIPs: len(s.IPs), records: len(s.Records)}
}

// plainSeedFailure is the seed failure's control half on r.n's plain
// primary: a failer after the primary, failing ADD and DEL, under
// kubelet's retries of a Deployment app for window; running are the IPs
// of the pods already up. Each retry must leak an IP (minRetries at
// least); the leaked IPs, held by nothing, are then freed by hand and the
// primary put back. It returns the figures, the running pods' IPs not
// counted.
func (r *k8sRun) plainSeedFailure(t *testing.T, app string, window time.Duration, minRetries int, running []string) seedFigures {
	t.Helper()
	logFile := filepath.Join(r.n.dir, "failer-plain.log")
	r.n.writePrimary(t, r.faulty(logFile))
	r.n.waitNetwork(t, "failer")
	f := r.retrySeed(t, app, logFile, window)
	f.heldIPs -= len(running)
	assert.GreaterOrEqual(t, f.retries, minRetries, "kubelet retried every 10-15 s")
	assert.Equal(t, f.retries, f.heldIPs, "LEAK: the plain primary holds one IP per retry")
	for _, ip := range r.n.state(t).IPs {
		if !slices.Contains(running, ip) {
			if r.keepLeaks && r.n.crio == nil {
				r.plainLeaks = append(r.plainLeaks, ip)
				continue
			}
			require.NoError(t, os.Remove(filepath.Join(r.n.w.ipamDir, r.n.net, ip)))
		}
	}
	require.NoError(t, os.Remove(r.fault))
	r.n.writePrimary(t, r.n.primary())
	r.n.waitNetworkWithout(t, "failer")
	return f
}

// plainPrimary starts the Deployment of 2 through the plain primary, and
// measures the seed failure's control half there: kubelet retries a pod
// whose primary fails ADD and DEL, and each retry leaks an IP.
func (r *k8sRun) plainPrimary(t *testing.T) {
	r.c.apply(t, []any{webDeployment("web", 2)})
	ips := r.waitRunning(t, "web", 2)
	s := r.n.state(t)
	require.ElementsMatch(t, ips, s.IPs, "each pod holds its IP")
	require.Empty(t, s.Records, "no Catena yet")

	r.plain = r.plainSeedFailure(t, "seed-plain", retryWindow, 4, s.IPs)
	summary("plain primary", "Deployment of 2 Running; seed failure for %s: %d kubelet retries, %d IPs held",
		retryWindow, r.plain.retries, r.plain.heldIPs)
}

// install installs the Helm chart (helm install, the node's paths and
// nothing else set), after a bad value is refused by its schema: the
// agent's pod becomes Ready, the primary is wrapped, and the running pods
// are adopted.
func (r *k8sRun) install(t *testing.T) {
	before := r.n.state(t)
	require.Len(t, before.Results, 2, "containerd cached both pods' results")
	out, err := r.c.helmErr(t, "install", helmRelease, chartDir(), "--namespace", "catena-system", "--create-namespace",
		"-f", r.c.valuesFile(t, r.n, r.tag), "--set", "reconcile.interval=soon")
	require.Error(t, err, out)
	assert.Contains(t, out, "values don't meet the specifications of the schema")
	assert.Contains(t, out, "/reconcile/interval")
	assert.Empty(t, strings.TrimSpace(r.c.helm(t, "list", "--namespace", "catena-system", "--short")), "nothing installed")
	start := time.Now()
	notes := r.c.helmInstall(t, r.n, r.tag)
	assert.Contains(t, notes, "rollout status daemonset/catena-agent", "NOTES.txt says how to check the node")
	ready := r.waitAgentReady(t, r.tag)
	r.c.waitNetwork(t, "catena")
	wrapped := time.Since(start)
	gen := r.n.generated(t)
	plugins, _ := gen["plugins"].([]any)
	require.Len(t, plugins, 1)
	catena, _ := plugins[0].(map[string]any)
	delegates, _ := catena["delegates"].([]any)
	assert.Equal(t, "catena", catena["type"])
	assert.Len(t, delegates, 3, "bridge, portmap, tuning")
	assert.Equal(t, r.n.net, gen["name"], "the primary's name is kept")

	after := r.n.state(t)
	assert.Equal(t, before.Results, after.Records, "both running pods are adopted")
	r.adopted = sampleSum(scrapeMetrics(t, agentMetricsURL), "catena_adoptions_total", "result=adopted")
	assert.Equal(t, 2.0, r.adopted, "the agent's metrics count the adoptions")
	assert.Equal(t, before.IPs, after.IPs)
	summary("install", "a bad value refused by the chart's schema; agent pod Ready %s after helm install, primary wrapped (%d delegates) at %s, %d of %d running pods adopted",
		ready.Round(time.Millisecond), len(delegates), wrapped.Round(time.Millisecond), len(after.Records), len(before.Results))
}

// waitAgentReady waits until the DaemonSet's one pod runs image tag and is
// Ready, and returns how long that took.
func (r *k8sRun) waitAgentReady(t *testing.T, tag string) time.Duration {
	t.Helper()
	return waitFor(t, "the agent's pod runs "+tag+" and is Ready", 2*time.Minute, 250*time.Millisecond, func() error {
		pods := r.c.pods(t, "catena-system", "app.kubernetes.io/component=agent")
		if len(pods) != 1 {
			return fmt.Errorf("%d agent pods", len(pods))
		}
		p := pods[0]
		if !strings.HasSuffix(p.Spec.Containers[0].Image, ":"+tag) || p.DeletionTimestamp != nil {
			return fmt.Errorf("agent pod %s runs %s", p.Name, p.Spec.Containers[0].Image)
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("agent pod %s is %s, not Ready", p.Name, p.Status.Phase)
	}, r.n.kubelet)
}

// podsThroughCatena scales the Deployment to 5 (the new pods get their IPs
// through Catena, with records) and to 0 (nothing is left, adopted pods
// included, once kubelet's DELs are done).
func (r *k8sRun) podsThroughCatena(t *testing.T) {
	ops := r.n.ops(t)
	addsBefore := countOps(ops, "ADD", "ok")
	r.c.scale(t, "web", 5)
	ips := r.waitRunning(t, "web", 5)
	s := r.n.state(t)
	assert.ElementsMatch(t, ips, s.IPs)
	assert.Len(t, s.Records, 5, "3 new records and 2 adopted")
	newAdds := countOps(r.n.ops(t), "ADD", "ok") - addsBefore
	assert.Equal(t, 3, newAdds, "the 3 new pods' ADDs went through Catena")

	start := time.Now()
	r.c.scale(t, "web", 0)
	r.waitGone(t, "web")
	r.n.waitClean(t, 2*time.Minute) // 2-3 s measured, 31 s under load
	clean := time.Since(start)
	waitFor(t, "kubelet removed the sandboxes", 3*time.Minute, time.Second, func() error {
		if sb := r.n.sandboxes(t, "web"); len(sb) > 0 {
			return fmt.Errorf("%d sandboxes of web left", len(sb))
		}
		return nil
	}, r.n.kubelet)
	removed := time.Since(start)
	after := r.n.ops(t)[len(ops):]
	dels := countOps(after, "DEL", "")
	assert.Equal(t, dels, countOps(after, "DEL", "ok"), "every DEL kubelet sent succeeded")
	assert.Equal(t, nodeState{}.String(), r.n.state(t).String())
	summary("pods through catena", "scale 2->5: %d ADDs through Catena, 5 IPs, 5 records; scale 5->0: nothing left at %s, sandboxes removed at %s, %d DELs all ok",
		newAdds, clean.Round(time.Millisecond), removed.Round(time.Millisecond), dels)
}
