package integration

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain/events"
	"github.com/catena-cni/catena/node/kevents"
)

// forgottenTeardown is the DEL-fails-then-forgotten case (containerd
// #12130) under kubelet, healed by the agent without any runtime. The
// primary gets failer twice after bridge, both faulty while the fault file
// exists: the first fails DEL, the second ADD. Kubelet's RunPodSandbox
// fails in the second; Catena's rollback then fails in the first, and so
// does containerd's DEL, so the record needs teardown and holds bridge's
// IP; containerd 2.4 forgets the sandbox. The Deployment is deleted, and
// the agent's retries fail while the fault holds. Then kubelet and
// containerd are stopped: nothing answers on the agent's runtime endpoint,
// and no runtime is left to send a DEL. The fault is lifted, and the
// agent's pending-teardown retry releases every IP and record by itself,
// in passes whose ListPodSandbox all failed. Kubelet and containerd are
// started again after; the agent's process is the same throughout.
func (r *k8sRun) forgottenTeardown(t *testing.T) {
	r.n.writePrimary(t, r.n.primary(
		failer(fmt.Sprintf(`"failDel":true,"faultFile":%q`, r.fault)),
		failer(fmt.Sprintf(`"failAdd":true,"faultFile":%q`, r.fault))))
	r.c.waitNetwork(t, "failer") // the agent regenerated the wrapped conflist
	r.c.waitNetwork(t, "catena")
	require.Equal(t, nodeState{}.String(), r.n.state(t).String(), "nothing held before")
	begin := scrapeMetrics(t, agentMetricsURL)
	since := time.Now()

	touch(t, r.fault)
	r.c.apply(t, []any{webDeployment("forgotten", 1)})
	waitFor(t, "a failed RunPodSandbox left a record that needs teardown", 2*time.Minute, 250*time.Millisecond, func() error {
		if n := r.n.phases(t)["needs-teardown"]; n == 0 {
			return fmt.Errorf("records by phase: %v", r.n.phases(t))
		}
		return nil
	}, r.n.kubelet)
	r.c.kubectl(t, nil, "delete", "deployment", "forgotten", "-n", "default")
	r.waitGone(t, "forgotten")
	var held nodeState
	waitFor(t, "containerd forgot the sandboxes, whose records need teardown and hold their IPs", time.Minute, 250*time.Millisecond, func() error {
		if sb := r.n.sandboxes(t, "forgotten"); len(sb) > 0 {
			return fmt.Errorf("%d sandboxes listed", len(sb))
		}
		held = r.n.state(t)
		if ph := r.n.phases(t); ph["needs-teardown"] != len(held.Records) {
			return fmt.Errorf("records by phase: %v", ph)
		}
		if len(held.IPs) != len(held.Records) {
			return fmt.Errorf("%s: not one IP per record", held)
		}
		return nil
	}, r.n.kubelet)
	r.forgottenHeld = len(held.Records)
	checkPodEvent(t, r.c.waitPodEvent(t, "forgotten", kevents.ReasonTeardownHeld, time.Minute), corev1.EventTypeWarning,
		"failed", "held: delegate")
	failedAdds := 0
	for _, op := range r.n.opsSince(t, since) {
		if op.Verb == "ADD" && op.Outcome == "error" {
			failedAdds++
		}
	}
	failedBefore := sampleSum(begin, "catena_teardown_retries_total", "outcome=error")
	failedRetries := waitMetricAbove(t, "the agent's retry failed while the fault holds", 2*time.Minute,
		failedBefore, "catena_teardown_retries_total", "outcome=error") - failedBefore

	// no runtime: kubelet and containerd stopped (their shims, and the
	// agent's container, go on); started again at the end, or by the
	// cleanup if the scenario fails meanwhile
	r.n.kubelet.stop(30 * time.Second)
	r.n.stopContainerd()
	t.Cleanup(func() {
		if !r.n.containerdRunning() {
			r.n.startContainerd(t)
		}
		if !r.n.kubelet.running() {
			r.n.restartKubelet(t)
		}
	})
	// from the next pass on, every ListPodSandbox fails
	waitMetricAbove(t, "a pass met no runtime", time.Minute,
		sampleSum(scrapeMetrics(t, agentMetricsURL), "catena_reconcile_runtime_errors_total"), "catena_reconcile_runtime_errors_total")
	down := scrapeMetrics(t, agentMetricsURL)
	assert.Equal(t, held.IPs, r.n.state(t).IPs, "the IPs are held while the fault lasts")

	require.NoError(t, os.Remove(r.fault))
	lifted := time.Now()
	// the record's backoff (1 s doubling per failed attempt) and a pass
	// (every 10 s since the reconciler scenario, 30 s by the manifest)
	healed := waitFor(t, "the agent released every IP and record", 6*time.Minute, 250*time.Millisecond, func() error {
		if s := r.n.state(t); len(s.IPs)+len(s.Records)+s.Veths > 0 {
			return fmt.Errorf("still %s", s)
		}
		return nil
	})
	// the pass that retried counts them when it ends
	waitMetricAbove(t, "the agent counted its retries", time.Minute,
		sampleSum(down, "catena_teardown_retries_total", "outcome=ok")+float64(len(held.Records))-1, "catena_teardown_retries_total", "outcome=ok")
	end := scrapeMetrics(t, agentMetricsURL)
	delta := func(name string, labels ...string) float64 {
		return sampleSum(end, name, labels...) - sampleSum(down, name, labels...)
	}
	passes, runtimeErrors := delta("catena_reconcile_passes_total"), delta("catena_reconcile_runtime_errors_total")
	assert.Positive(t, passes)
	assert.Equal(t, passes, runtimeErrors, "no pass since the runtime stopped reached it")
	assert.Equal(t, float64(len(held.Records)), delta("catena_teardown_retries_total", "outcome=ok"))
	assert.Zero(t, sampleSum(end, "catena_reconcile_marked_total")-sampleSum(begin, "catena_reconcile_marked_total"),
		"a record that needs teardown is never marked")
	assert.Zero(t, sampleSum(end, "catena_reconcile_reclaimed_total")-sampleSum(begin, "catena_reconcile_reclaimed_total"))
	assert.Equal(t, sampleSum(begin, "process_start_time_seconds"), sampleSum(end, "process_start_time_seconds"),
		"the same agent process throughout")
	var released []string
	for _, op := range r.n.opsSince(t, lifted) {
		if slices.ContainsFunc(held.Records, func(id string) bool { return strings.Contains(op.Attachment, id) }) {
			released = append(released, op.Verb+" "+op.Outcome)
		}
	}
	assert.Equal(t, slices.Repeat([]string{"RETRY ok"}, len(held.Records)), released,
		"after the lift, only the agent's RETRY touched them: no DEL, ADD or RECLAIM")
	// the agent's process saw them held, so their release is told
	checkPodEvent(t, r.c.waitPodEvent(t, "forgotten", kevents.ReasonTeardownReleased, time.Minute), corev1.EventTypeNormal,
		"RETRY of", "released what was held")

	r.n.startContainerd(t)
	r.n.restartKubelet(t)
	waitFor(t, "the node is Ready again", 2*time.Minute, 250*time.Millisecond, func() error {
		return r.c.nodeReady(t)
	}, r.n.kubelet)
	r.waitAgentReady(t, r.agentTag())
	assert.Empty(t, r.n.sandboxes(t, "forgotten"))
	r.n.writePrimary(t, r.n.primary())
	r.c.waitNetworkWithout(t, "failer")
	r.n.waitClean(t, time.Minute)
	summary("forgotten teardown", "%d failed RunPodSandbox (ADD failed, rollback DEL failed), containerd forgot them: %d records need teardown holding %d IPs, %d veths; "+
		"%g failed agent retries while the fault held; kubelet and containerd stopped, fault lifted: released by %d agent RETRYs in %s, IPs %d -> 0, records %d -> 0, in %g passes that all failed ListPodSandbox; 0 marked, 0 reclaimed, agent not restarted",
		failedAdds, len(held.Records), len(held.IPs), held.Veths, failedRetries, len(released), healed.Round(time.Millisecond),
		len(held.IPs), len(held.Records), passes)
}

// waitMetricAbove waits until the agent's metric (the sum of name's samples
// with labels) is above floor and returns its value.
func waitMetricAbove(t *testing.T, what string, limit time.Duration, floor float64, name string, labels ...string) float64 {
	t.Helper()
	var v float64
	waitFor(t, what, limit, time.Second, func() error {
		if v = sampleSum(scrapeMetrics(t, agentMetricsURL), name, labels...); v <= floor {
			return fmt.Errorf("%s%v is %g", name, labels, v)
		}
		return nil
	})
	return v
}

// phases counts the node's records by phase, read through Catena's store
// (a record saved meanwhile is read as Load reads it; one removed meanwhile
// is not counted).
func (n *k8sNode) phases(t *testing.T) map[string]int {
	t.Helper()
	return n.phasesOf(t, n.net)
}

// phasesOf counts the records of network net by phase.
func (n *k8sNode) phasesOf(t *testing.T, net string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for phase, keys := range n.recordsByPhase(t, net) {
		out[phase] = len(keys)
	}
	return out
}

// recordsByPhase lists the keys (network/container/ifname) of network
// net's records by phase.
func (n *k8sNode) recordsByPhase(t *testing.T, net string) map[string][]string {
	t.Helper()
	store := cache.NewDiskStore(afero.NewOsFs(), n.cacheDir(), cache.NewFlockLocker(filepath.Join(n.cacheDir(), cache.LocksDir)))
	keys, err := store.List()
	require.NoError(t, err)
	out := map[string][]string{}
	for _, key := range keys {
		rec, err := store.Load(key)
		if errors.Is(err, cache.ErrNotFound) {
			continue
		}
		require.NoError(t, err)
		if key.Network == net {
			out[string(rec.Phase)] = append(out[string(rec.Phase)], key.String())
		}
	}
	return out
}

// opsSince are the node's journal's operations that started at or after t0.
func (n *k8sNode) opsSince(t *testing.T, t0 time.Time) []events.Op {
	t.Helper()
	var out []events.Op
	for _, op := range n.ops(t) {
		if !op.Start.Before(t0) {
			out = append(out, op)
		}
	}
	return out
}

// agentTag is the image tag the agent's DaemonSet runs now.
func (r *k8sRun) agentTag() string {
	if r.upgradeArchive != "" {
		return upgradeTag
	}
	return r.tag
}
