package integration

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/catena-cni/catena/libchain/events"
	"github.com/catena-cni/catena/node/kevents"
)

const (
	// outageMin is how long the API server stays stopped at least
	outageMin = time.Minute
	// outageMax bounds it: the held teardowns must be released by then
	outageMax = 3 * time.Minute
	// agentReadyURL is the agent's readiness on the host network
	agentReadyURL = "http://127.0.0.1:9617/readyz"
	// outagePassEvery is the flannel ConfigMap's reconcile interval
	outagePassEvery = 10 * time.Second
)

// apiServerOutage: the API server stopped for at least a
// minute while kubelet churns pods through Catena on flannel's network.
// It is stopped by SIGSTOP, not killed: its connections hang, as those of
// a partitioned or overloaded API server do, so every client waits out
// its own timeouts. Meanwhile the sandboxes of 2 of 3 pods die (their
// processes killed) and kubelet, from what it holds, tears them down and
// creates new ones through Catena: first against a failer failing ADD
// (each ADD rolled back), then also against one failing DEL, so that each
// failed ADD's rollback fails and its record needs teardown: released by
// the agent's RETRY once containerd forgot the sandbox, or by kubelet's
// DEL when containerd kept it and kubelet got there first (a race). The
// faults are lifted within the outage, which lasts until every held
// record is released (at most outageMax). Checked while it is stopped:
// the agent's /readyz answered 200 at every poll, the same agent process
// ran a reconcile pass every interval, every held record was released,
// the events the agent could not send counted as send errors. Once it runs
// again: the pods are Running with their IPs, the node holds one IP, veth,
// flannel file and record per pod, and the events recorded during the
// outage reach the API server (held and released where the journal shows
// a failed teardown and a RETRY that released it).
func (r *k8sRun) apiServerOutage(t *testing.T) {
	fl := r.flannel(t)
	addFault, delFault := r.fl.fault, r.fl.fault+"-del"
	logFile := filepath.Join(r.n.dir, "failer-outage.log")
	r.writeFlannel(t, true,
		failer(fmt.Sprintf(`"failDel":true,"faultFile":%q,"logFile":%q`, delFault, logFile)),
		failer(fmt.Sprintf(`"failAdd":true,"faultFile":%q,"logFile":%q`, addFault, logFile)))
	r.c.apply(t, []any{webDeployment("fout", 3)})
	before := r.waitRunning(t, "fout", 3)
	require.Equal(t, flannelHeld{IPs: 3, Veths: 3, Files: 3, Records: 3}, r.flannelHeld(t))
	var victims []string
	for _, sb := range r.n.sandboxes(t, "fout") {
		if sb.State == cri.PodSandboxState_SANDBOX_READY && len(victims) < 2 {
			victims = append(victims, sb.Id)
		}
	}
	require.Len(t, victims, 2)
	begin := scrapeMetrics(t, agentMetricsURL)

	api := r.c.apiserver.cmd.Process
	require.NoError(t, api.Signal(syscall.SIGSTOP))
	t0 := time.Now()
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = api.Signal(syscall.SIGCONT)
		}
		for _, f := range []string{addFault, delFault} {
			if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
				t.Errorf("removing %s: %v", f, err)
			}
		}
	})
	_, err := r.c.kubectlErr(nil, "get", "nodes", "--request-timeout=3s")
	require.Error(t, err, "the API server does not answer while stopped")
	probe := startReadyProbe()
	t.Cleanup(func() { probe.stop() })

	// churn: the sandboxes die while new ADDs fail and are rolled back
	touch(t, addFault)
	for _, id := range victims {
		r.n.killSandbox(t, id)
	}
	waitFor(t, "kubelet's new sandboxes failed ADD and were rolled back", time.Minute, 250*time.Millisecond, func() error {
		if n := countOps(podOps(r.n.opsSince(t, t0), "fout-"), "ADD", "error"); n == 0 {
			return fmt.Errorf("no failed ADD of fout's pods yet")
		}
		return nil
	}, r.n.kubelet)
	// then their rollbacks fail too: the records need teardown
	touch(t, delFault)
	held := map[string]bool{} // every record seen needing teardown
	seeHeld := func() int {
		keys := r.n.recordsByPhase(t, fl.net)["needs-teardown"]
		for _, k := range keys {
			held[k] = true
		}
		return len(keys)
	}
	waitFor(t, "a failed ADD whose rollback failed left a record that needs teardown", time.Minute, 250*time.Millisecond, func() error {
		if seeHeld() == 0 {
			return fmt.Errorf("records by phase: %v", r.n.phasesOf(t, fl.net))
		}
		return nil
	}, r.n.kubelet)
	heldAt := time.Now()
	require.NoError(t, os.Remove(delFault))
	require.NoError(t, os.Remove(addFault))

	// the outage goes on until a minute has passed and every held record
	// is released
	released := waitFor(t, "every held record released with the API server stopped", outageMax-time.Since(t0), 250*time.Millisecond, func() error {
		if n := seeHeld(); n > 0 {
			return fmt.Errorf("%d records still need teardown", n)
		}
		return nil
	}, r.n.kubelet)
	if wait := outageMin - time.Since(t0); wait > 0 {
		time.Sleep(wait)
	}
	during := scrapeMetrics(t, agentMetricsURL)
	polls, notReady := probe.stop()
	stoppedFor := time.Since(t0)
	ops := r.n.opsSince(t, t0)
	require.NoError(t, api.Signal(syscall.SIGCONT))
	resumed = true

	delta := func(name string, labels ...string) float64 {
		return sampleSum(during, name, labels...) - sampleSum(begin, name, labels...)
	}
	assert.Equal(t, sampleSum(begin, "process_start_time_seconds"), sampleSum(during, "process_start_time_seconds"),
		"the same agent process throughout the outage")
	assert.Positive(t, polls)
	assert.Zero(t, notReady, "the agent's /readyz answered 200 at every poll during the outage")
	passes := delta("catena_reconcile_passes_total")
	assert.GreaterOrEqual(t, passes, stoppedFor.Seconds()/outagePassEvery.Seconds()-1,
		"a reconcile pass every %s while the API server was stopped", outagePassEvery)
	sendErrors := delta("catena_events_send_errors_total")
	assert.Positive(t, sendErrors, "event writes failed while the API server was stopped, and were counted")
	// what released each held record, during the outage
	by := map[string]int{}
	for key := range held {
		last := ""
		for _, op := range ops {
			if op.Attachment == key && op.Outcome == "ok" {
				last = op.Verb
			}
		}
		assert.NotEmpty(t, last, "held record %s released by an operation during the outage", key)
		by[last]++
	}
	// Which op releases a held record is a race: containerd may keep the
	// failed sandbox and kubelet's StopPodSandbox DEL may come before the
	// agent's next RETRY (seen in 2 of 6 runs). Either is the node's work
	// done with the API server stopped; the agent's own is its passes.
	fout := podOps(ops, "fout-")
	failedTeardowns := 0
	for _, verb := range []string{"DEL", "RETRY", "REPAIR", "RECLAIM"} {
		failedTeardowns += countOps(fout, verb, "error")
	}
	failedAdds := countOps(fout, "ADD", "error")
	okAdds := countOps(fout, "ADD", "ok")
	okDels := countOps(fout, "DEL", "ok")
	assert.GreaterOrEqual(t, okAdds, len(victims), "kubelet's new sandboxes got their network during the outage")
	assert.GreaterOrEqual(t, okDels, len(victims), "kubelet tore the dead sandboxes down during the outage")

	waitFor(t, "the API server answers again", 2*time.Minute, time.Second, func() error {
		_, err := r.c.kubectlErr(nil, "get", "nodes", "--request-timeout=5s")
		return err
	})
	waitFor(t, "the node is Ready again", 2*time.Minute, time.Second, func() error { return r.c.nodeReady(t) }, r.n.kubelet)
	after := r.waitRunning(t, "fout", 3)
	waitFor(t, "one IP, veth, flannel file and record per pod", 2*time.Minute, time.Second, func() error {
		if h := r.flannelHeld(t); h != (flannelHeld{IPs: 3, Veths: 3, Files: 3, Records: 3}) {
			return fmt.Errorf("%s", h)
		}
		return nil
	}, r.n.kubelet)
	assert.ElementsMatch(t, after, fl.ips())
	// the events recorded while it was stopped reach it after
	const late = 5 * time.Minute
	checkPodEvent(t, r.c.waitPodEvent(t, "fout", kevents.ReasonRolledBack, late), corev1.EventTypeWarning, "failed at delegate")
	if failedTeardowns > 0 { // a teardown stopped at the failing DEL: held
		checkPodEvent(t, r.c.waitPodEvent(t, "fout", kevents.ReasonTeardownHeld, late), corev1.EventTypeWarning, "held: delegate")
		if by["RETRY"] > 0 { // and the agent's RETRY released it
			checkPodEvent(t, r.c.waitPodEvent(t, "fout", kevents.ReasonTeardownReleased, late), corev1.EventTypeNormal, "released what was held")
		}
	}
	end := scrapeMetrics(t, agentMetricsURL)
	dropped := sampleSum(end, "catena_events_dropped_total") - sampleSum(begin, "catena_events_dropped_total")

	r.c.kubectl(t, nil, "delete", "deployment", "fout", "-n", "default")
	r.waitGone(t, "fout")
	r.writeFlannel(t, true)
	r.waitFlannelClean(t, time.Minute)
	summary("api server outage", "API server stopped (SIGSTOP) %s while kubelet churned fout's pods: 2 sandboxes killed, %d failed ADDs, %d records held (rollback failed) (the first %s into the outage) then released, by verb %v, %s after the faults were lifted; "+
		"%d failed teardowns; %d ADDs and %d DELs ok; agent /readyz 200 at %d of %d polls, same process, %g reconcile passes (every %s), %g event writes failed; after: 3 pods Running (IPs %v -> %v), events delivered late, %g dropped",
		stoppedFor.Round(time.Second), failedAdds, len(held), heldAt.Sub(t0).Round(time.Second), by, released.Round(time.Millisecond),
		failedTeardowns, okAdds, okDels, polls-notReady, polls, passes, outagePassEvery, sendErrors, before, after, dropped)
}

// podOps are the operations on pods whose name starts with prefix.
func podOps(ops []events.Op, prefix string) []events.Op {
	var out []events.Op
	for _, op := range ops {
		if op.Pod != nil && strings.HasPrefix(op.Pod.Name, prefix) {
			out = append(out, op)
		}
	}
	return out
}

// readyProbe polls the agent's /readyz every second until stopped.
type readyProbe struct {
	done            chan struct{}
	once            sync.Once
	wg              sync.WaitGroup
	mu              sync.Mutex
	polls, notReady int
}

func startReadyProbe() *readyProbe {
	p := &readyProbe{done: make(chan struct{})}
	client := &http.Client{Timeout: 2 * time.Second}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			err := httpOK(client, agentReadyURL)
			p.mu.Lock()
			p.polls++
			if err != nil {
				p.notReady++
			}
			p.mu.Unlock()
			select {
			case <-p.done:
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

// stop ends the polls (once; the cleanup stops it if the test failed
// first) and returns how many there were and how many did not answer 200.
func (p *readyProbe) stop() (polls, notReady int) {
	p.once.Do(func() { close(p.done) })
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.polls, p.notReady
}

// killSandbox kills every process of the pod sandbox id (its cgroup under
// the node's cgroupRoot), as if it had died; kubelet sees it dead.
func (n *k8sNode) killSandbox(t *testing.T, id string) {
	t.Helper()
	root := filepath.Join("/sys/fs/cgroup/pids", n.cgroupRoot)
	killed := 0
	err := filepath.WalkDir(root, func(path string, e os.DirEntry, err error) error {
		if err != nil || !e.IsDir() || !strings.Contains(e.Name(), id) {
			return err
		}
		raw, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		if err != nil {
			return err
		}
		for _, f := range strings.Fields(string(raw)) {
			if pid, err := strconv.Atoi(f); err == nil && syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
		return filepath.SkipDir
	})
	require.NoError(t, err)
	require.Positive(t, killed, "a process of sandbox %s under %s", id, root)
}
