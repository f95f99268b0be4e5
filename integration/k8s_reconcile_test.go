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

	"github.com/catena-cni/catena/node/kevents"
)

// agentMetricsURL is the agent's /metrics: it runs in the host network,
// on the manifest's --listen-addr.
const agentMetricsURL = "http://127.0.0.1:9617/metrics"

// reconcilerUnderKubelet wipes containerd's state and restarts containerd
// and kubelet with pods running: 3 of web, and one with a hostPort, whose
// DNAT rules portmap made. Kubelet recreates the pods (new sandboxes, new
// ADDs through Catena), and the agent reclaims the lost sandboxes'
// attachments from its container: IPs held settle at exactly one per pod,
// and no iptables rule of a lost sandbox is left. The agent's container is
// lost with the rest and started again with the ConfigMap's reconciler
// settings shortened before the wipe (a pass every 10 s, 30 s grace, as
// flannel's reconciler scenario has them): the manifest's 2 min grace
// would double the scenario's time, for the same mark and reclaim. The
// agent keeps them until the uninstall.
func (r *k8sRun) reconcilerUnderKubelet(t *testing.T) {
	r.c.scale(t, "web", 3)
	r.c.apply(t, []any{hostPortDeployment("hostport", hostPort())})
	before := append(r.waitRunning(t, "web", 3), r.waitRunning(t, "hostport", 1)...)
	const pods = 4
	lost := r.n.state(t).Results
	require.Len(t, lost, pods)
	lostHostPort := r.n.sandboxes(t, "hostport")[0].Id
	rulesBefore := iptablesMentions(t, lostHostPort)
	require.True(t, portmapRulesFor(run(t, "iptables-save"), lostHostPort), "portmap's DNAT rules of the hostPort pod")
	r.c.kubectl(t, nil, "patch", "configmap", "catena-options", "-n", "catena-system", "--type=merge",
		"-p", `{"data":{"CATENA_AGENT_RECONCILE_INTERVAL":"10s","CATENA_AGENT_GRACE":"30s"}}`)

	start := time.Now()
	after := r.wipeUnderPods(t, before, "web", "hostport")
	recreated := time.Since(start)
	peak := len(r.n.state(t).IPs)
	r.waitAgentReady(t, r.agentTag())
	first := r.agentStatus(t) // the agent's pod lost its container too
	assert.Equal(t, 2*pods, peak, "the lost sandboxes' IPs are held until reclaimed")

	// the record older than grace (30 s), a mark, a reclaim at least grace
	// later, on the 10 s passes: well under the manifest's grace (2 min)
	// twice over, which the limit refuses
	var marked time.Duration
	settled := waitFor(t, "IPs held settle at one per pod", 3*time.Minute, time.Second, func() error {
		if marked == 0 && r.n.marks(t) > 0 {
			marked = time.Since(start)
		}
		if s := r.n.state(t); len(s.IPs) != pods || len(s.Records) != pods {
			return fmt.Errorf("%s", s)
		}
		return nil
	}, r.n.kubelet)
	assert.Positive(t, marked, "the reconciler's marks were seen on disk")
	r.marked = start.Add(marked)
	s := r.n.state(t)
	assert.ElementsMatch(t, after, s.IPs, "exactly the running pods' IPs")
	assert.Equal(t, pods, s.Veths)
	rulesLeft := 0
	for _, id := range lost {
		rulesLeft += iptablesMentions(t, id)
	}
	assert.Zero(t, rulesLeft, "no iptables rule of a reclaimed attachment: the agent's portmap removed the hostPort pod's DNAT")
	assert.Positive(t, iptablesMentions(t, r.n.sandboxes(t, "hostport")[0].Id), "the recreated hostPort pod has its own")
	reclaims := 0
	for _, op := range r.n.reclaimsOf(t, lost, pods) {
		if op.Outcome == "ok" {
			reclaims++
		}
	}
	assert.Equal(t, pods, reclaims, "each lost attachment reclaimed once, by the agent")
	for _, d := range []string{"web", "hostport"} {
		checkPodEvent(t, r.c.waitPodEvent(t, d, kevents.ReasonReclaimed, time.Minute), corev1.EventTypeNormal,
			"the runtime no longer has the sandbox")
	}
	agent := r.agentStatus(t)
	assert.Equal(t, first.started, agent.started, "the agent process that marked is the one that reclaimed: it never restarted (it was OOMKilled)")
	r.reclaimAgent = agent

	// containerd forgot the lost sandboxes' libcni cache entries too: they
	// are the runtime's, and nothing reads them; remove them
	stale := 0
	for _, id := range lost {
		if slices.Contains(s.Results, id) {
			stale++
			require.NoError(t, os.Remove(filepath.Join(libcniResults, r.n.net+"-"+id+"-eth0")))
		}
	}
	assert.Len(t, r.n.state(t).Results, pods)
	r.c.scale(t, "web", 0)
	r.c.kubectl(t, nil, "delete", "deployment", "hostport", "-n", "default")
	r.waitGone(t, "web")
	r.waitGone(t, "hostport")
	r.n.waitClean(t, time.Minute)
	summary("reconciler", "containerd wiped with %d pods (%v), 1 with a hostPort: recreated in %s with %v, IPs held %d, settled at %d (one per pod) %s later by %d RECLAIMs (10 s passes, 30 s grace); "+
		"iptables lines of the lost sandboxes %d after (hostPort pod's: %d before); marks seen at %s; agent %s; %d libcni entries of the lost sandboxes left by containerd",
		pods, before, recreated.Round(time.Millisecond), after, peak, len(s.IPs), settled.Round(time.Second), reclaims,
		rulesLeft, rulesBefore, marked.Round(time.Second), agent.describe(start), stale)
}

// wipeUnderPods stops kubelet, wipes containerd's state (the images are
// imported again) and restarts kubelet, with the pods of apps running,
// whose IPs are before. It waits until kubelet has recreated one sandbox
// per pod, each Running with an IP that is not one of before, and returns
// those IPs.
func (r *k8sRun) wipeUnderPods(t *testing.T, before []string, apps ...string) []string {
	t.Helper()
	r.n.kubelet.stop(30 * time.Second)
	images := []string{catenaImageArchive(t)}
	if r.upgradeArchive != "" {
		images = append(images, r.upgradeArchive)
	}
	r.n.wipeContainerd(t, images...)
	r.n.restartKubelet(t)
	var after []string
	waitFor(t, fmt.Sprintf("kubelet recreated the %d pods' sandboxes, with new IPs", len(before)), 3*time.Minute, 250*time.Millisecond, func() error {
		var pods []corev1.Pod
		sandboxes := 0
		for _, app := range apps {
			sandboxes += len(r.n.sandboxes(t, app))
			pods = append(pods, r.c.pods(t, "default", "app="+app)...)
		}
		if sandboxes != len(before) {
			return fmt.Errorf("%d sandboxes", sandboxes)
		}
		ips, err := runningIPs(pods)
		if err != nil {
			return err
		}
		for _, ip := range ips {
			if slices.Contains(before, ip) {
				return fmt.Errorf("pod IP %s is the lost sandbox's", ip)
			}
		}
		after = ips
		return nil
	}, r.n.kubelet)
	return after
}

// hostPortDeployment is webDeployment with one replica whose container
// maps port on the host (portmap's DNAT rules).
func hostPortDeployment(name string, port int32) *appsv1.Deployment {
	d := webDeployment(name, 1)
	d.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: port, Protocol: corev1.ProtocolTCP}}
	return d
}

// marks counts the reconciler's marks on the node (phase one).
func (n *k8sNode) marks(t *testing.T) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(n.cacheDir(), "reconcile", n.net, "*.json"))
	require.NoError(t, err)
	return len(m)
}

// agentStatus is the agent's process and container as seen from the host.
type agentStatus struct {
	started  time.Time // its process_start_time_seconds
	restarts int32     // kubelet's restart count of its container
	last     string    // how its previous container ended ("" if none)
}

// agentStatus scrapes the agent and reads its pod.
func (r *k8sRun) agentStatus(t *testing.T) agentStatus {
	t.Helper()
	secs := sampleSum(scrapeMetrics(t, agentMetricsURL), "process_start_time_seconds")
	require.Positive(t, secs, "the agent exports process_start_time_seconds")
	a := agentStatus{started: time.Unix(0, int64(secs*1e9))}
	pods := r.c.pods(t, "catena-system", "app.kubernetes.io/component=agent")
	require.Len(t, pods, 1)
	for _, cs := range pods[0].Status.ContainerStatuses {
		a.restarts = cs.RestartCount
		if term := cs.LastTerminationState.Terminated; term != nil {
			a.last = fmt.Sprintf("%s (exit %d, %s) at %s", term.Reason, term.ExitCode, strings.TrimSpace(term.Message), term.FinishedAt.Format(time.RFC3339))
		}
	}
	return a
}

// describe says when the agent's process started, relative to t0.
func (a agentStatus) describe(t0 time.Time) string {
	s := fmt.Sprintf("process started %s after the wipe, container restarts %d", a.started.Sub(t0).Round(time.Second), a.restarts)
	if a.last != "" {
		s += ", last ended " + a.last
	}
	return s
}

// metrics scrapes the agent's /metrics from the host, and checks that the
// scenarios above show: operations, records, reclaims and adoptions.
func (r *k8sRun) metrics(t *testing.T) {
	m := scrapeMetrics(t, agentMetricsURL)
	adds := sampleSum(m, "catena_operations_total", "verb=add")
	dels := sampleSum(m, "catena_operations_total", "verb=del")
	reclaimOps := sampleSum(m, "catena_operations_total", "verb=reclaim")
	retryOps := sampleSum(m, "catena_operations_total", "verb=retry", "outcome=ok")
	passes := sampleSum(m, "catena_reconcile_passes_total")
	marked := sampleSum(m, "catena_reconcile_marked_total")
	reclaimed := sampleSum(m, "catena_reconcile_reclaimed_total")
	retried := sampleSum(m, "catena_teardown_retries_total", "outcome=ok")
	started := time.Unix(0, int64(sampleSum(m, "process_start_time_seconds")*1e9))
	assert.Positive(t, adds)
	assert.Positive(t, dels)
	assert.GreaterOrEqual(t, reclaimOps, 4.0, "the reconciler scenario's RECLAIMs, in the journal")
	assert.GreaterOrEqual(t, retryOps, float64(r.forgottenHeld), "the forgotten teardowns' RETRYs, in the journal")
	assert.NotNil(t, m["catena_records"], "records by network and phase")
	// the reconcile counters are the agent process's, which started when
	// containerd was wiped (its container was lost too) and was never
	// restarted since: it marked what it reclaimed
	rss := sampleSum(m, "process_resident_memory_bytes")
	assert.Equal(t, r.reclaimAgent.started, started, "the agent process is the one that marked and reclaimed")
	assert.True(t, started.Before(r.marked), "it started before the marks")
	assert.GreaterOrEqual(t, marked, 4.0, "its marks")
	assert.GreaterOrEqual(t, reclaimed, 4.0, "its reclaims")
	assert.GreaterOrEqual(t, retried, float64(r.forgottenHeld), "its retries")
	assert.Less(t, rss, float64(64<<20), "the agent's memory, well under its container's 128 MiB limit")
	summary("metrics", "scraped %s: journal: %g ADDs, %g DELs, %g RECLAIMs, %g RETRYs ok; the agent process (started at the wipe, %s before the scrape, %.1f MiB resident): %g passes, %g marked, %g reclaimed, %g teardowns retried, %g held; adoptions at the install: %g",
		agentMetricsURL, adds, dels, reclaimOps, retryOps, time.Since(started).Round(time.Second), rss/(1<<20), passes, marked, reclaimed, retried,
		sampleSum(m, "catena_held_attachments"), r.adopted)
}
