package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/catena-cni/catena/tools/nodebench"
)

// offPathMemory is the agent's memory limit while it is to be OOM-killed:
// below what it needs to start. With its Go soft limit at 80% of it
// (--memory-limit), the agent runs in 12 MiB on this node's few records;
// 6 MiB is below its need, and the kernel kills it as it starts, every
// time kubelet restarts it.
const offPathMemory = "6Mi"

// agentOffPath shows the agent off the pods' path, on the containerd node
// running flannel with Catena installed over it (deploy/catena.yaml): a
// round of the node-density bench (the Deployment scaled to N and back,
// every pod's steps watched) with the agent up; one with its pod gone (the
// DaemonSet's nodeSelector matching no node: the DaemonSet stays, so the
// conflist does); one while it is OOM-killed over and over (a memory limit
// below its need); then the agent back, Ready, its metrics counting every
// operation of the rounds it missed (the journal is read at start), and
// nothing held. Each round's pods go through Catena (one ADD and a DEL
// per pod), and their created -> Ready latency is compared, pooled over
// CATENA_BENCH_NODE_ROUNDS rounds of each condition (one in make test,
// where node density's last round is the agent up).
func (r *k8sRun) agentOffPath(t *testing.T) {
	cfg, err := nodebench.ConfigFromEnv(os.Getenv)
	require.NoError(t, err)
	d := &densityRun{r: r, node: containerdDensity{r}, cfg: cfg, metrics: r.c.httpClient(t)}
	d.setup(t)
	d.switchTo(t, nodebench.Catena)
	t.Cleanup(func() {
		_, _ = r.c.kubectlErr(nil, "delete", "deployment", densityApp, "-n", "default", "--ignore-not-found")
	})
	n := cfg.Counts[len(cfg.Counts)-1]
	conf := filepath.Join(r.n.confDir(), generatedName)
	type cond struct {
		name     string
		p50, p99 time.Duration
	}
	var conds []cond
	add := func(name string, dist nodebench.Dist) {
		p50, _ := dist.Quantile(0.5)
		p99, _ := dist.Quantile(0.99)
		conds = append(conds, cond{name, p50, p99})
	}
	// CATENA_BENCH_NODE_ROUNDS rounds of each condition, their pods
	// pooled (1 in make test)
	index := 0
	round := func(name string) {
		var ds []nodebench.Dist
		for range cfg.Rounds {
			ds = append(ds, d.round(t, nodebench.Catena, n, index).Dists[nodebench.CreatedReady.ID])
			index++
		}
		pooled, err := nodebench.Merge(ds...)
		require.NoError(t, err)
		add(name, pooled)
	}
	patchAgent := func(patch string) {
		r.c.kubectl(t, nil, "patch", "daemonset", "catena-agent", "-n", "catena-system", "--type=strategic", "-p", patch)
	}
	var ds appsv1.DaemonSet
	require.NoError(t, r.c.getJSON(&ds, "daemonset", "catena-agent", "-n", "catena-system"))
	resources, err := json.Marshal(ds.Spec.Template.Spec.Containers[0].Resources)
	require.NoError(t, err)
	// The node density scenario's last round through Catena, just before,
	// is the agent up; alone, this scenario runs one.
	if up := r.densityCatena; up != nil && up.N == n && cfg.Rounds == 1 {
		add("agent up (node density's round)", up.Dists[nodebench.CreatedReady.ID])
	} else {
		round("agent up")
	}

	patchAgent(`{"spec":{"template":{"spec":{"nodeSelector":{"catena.dev/nowhere":"true"}}}}}`)
	r.waitAgentGone(t, false)
	require.FileExists(t, conf, "an agent stopped with its DaemonSet present leaves the conflist")
	round("agent stopped")

	patchAgent(`{"spec":{"template":{"spec":{"nodeSelector":{"catena.dev/nowhere":null},` +
		`"containers":[{"name":"agent","resources":{"limits":{"memory":"` + offPathMemory + `"},"requests":{"memory":"` + offPathMemory + `"}}}]}}}}`)
	var kills int32
	waitFor(t, "the agent OOM-killed", 3*time.Minute, 250*time.Millisecond, func() error {
		for _, p := range r.c.pods(t, "catena-system", "app.kubernetes.io/component=agent") {
			for _, cs := range p.Status.ContainerStatuses {
				if term := cs.LastTerminationState.Terminated; term != nil && term.Reason == "OOMKilled" {
					kills = cs.RestartCount
					return nil
				}
			}
		}
		return fmt.Errorf("not OOM-killed yet")
	}, r.n.kubelet)
	round("agent OOM-killed")
	killsAfter := r.agentRestarts(t)
	require.FileExists(t, conf, "an agent OOM-killed leaves the conflist")

	adds := countOps(r.n.ops(t), "ADD", "ok")
	patchAgent(`{"spec":{"template":{"spec":{"containers":[{"name":"agent","resources":` + string(resources) + `}]}}}}`)
	back := r.waitAgentReady(t, r.tag) // density installs r.tag
	fams := scrapeMetrics(t, agentMetricsURL)
	counted := sampleSum(fams, "catena_operations_total", "verb=add", "outcome=ok")
	assert.GreaterOrEqual(t, counted, float64(adds), "the agent back counts every ADD of the journal, those it missed included")
	assert.GreaterOrEqual(t, adds, 3*n*cfg.Rounds, "one ADD per pod of every round")
	d.node.waitClean(t, time.Minute)

	base := conds[0]
	var parts []string
	for _, c := range conds {
		parts = append(parts, fmt.Sprintf("%s p50 %s p99 %s (%.2f)", c.name, c.p50.Round(time.Millisecond), c.p99.Round(time.Millisecond),
			float64(c.p50)/float64(base.p50)))
		// A loose bound at the suite's few pods; make bench-node's rounds
		// measure it.
		assert.LessOrEqual(t, c.p50, 2*base.p50+time.Second, "%s: created -> Ready p50 %s against %s with the agent up", c.name, c.p50, base.p50)
	}
	summary("agent off the path", "%d pods per round, %d rounds of each, through Catena over flannel, created -> Ready: %s; OOM-killed %d times (limit %s) meanwhile; the agent back and Ready in %s, counting %g ADDs ok; nothing held",
		n, cfg.Rounds, strings.Join(parts, "; "), max(kills, killsAfter), offPathMemory, back.Round(time.Millisecond), counted)
}

// agentRestarts is the agent container's restart count, 0 without a pod.
func (r *k8sRun) agentRestarts(t *testing.T) int32 {
	t.Helper()
	for _, p := range r.c.pods(t, "catena-system", "app.kubernetes.io/component=agent") {
		for _, cs := range p.Status.ContainerStatuses {
			return cs.RestartCount
		}
	}
	return 0
}
