package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReconcileForgottenTeardown is containerd #12130 with the agent: the
// chain [bridge + host-local, failer failing DEL, failer failing ADD,
// portmap], both failers while a fault file exists. RunPodSandbox fails in
// the second failer; Catena's rollback and containerd's DEL fail in the
// first, so the record needs teardown and holds the bridge's IP. containerd 2.4 forgets the sandbox; 1.6 keeps it
// NOTREADY and cannot stop it. `catena-agent run` is pointed at a runtime
// endpoint where nothing listens, so no CRI call can succeed: its retry
// fails while the fault lasts, and once the fault is lifted its backoff
// retry releases the IP, the veth and the record by itself.
func TestReconcileForgottenTeardown(t *testing.T) {
	const (
		interval = 200 * time.Millisecond
		grace    = 2 * time.Second
	)
	onBothContainerds(t, func(t *testing.T, n *agentNode) {
		fault := filepath.Join(t.TempDir(), "fault")
		touch(t, fault)
		flags := n.reconcileFlags(interval, grace)
		flags[1] = "unix://" + filepath.Join(t.TempDir(), "no-runtime.sock") // --runtime-endpoint
		p := n.useChain(flags, n.w.bridgeDelegate(),
			failer(fmt.Sprintf(`"failDel":true,"faultFile":%q`, fault)),
			failer(fmt.Sprintf(`"failAdd":true,"faultFile":%q`, fault)), portmapDelegate)

		_, err := n.d.runPod(n.d.podConfig("forgotten", hostPort()))
		require.Error(t, err, "the failer fails ADD")
		pods := n.d.pods()
		if n.v.legacy {
			require.Len(t, pods, 1, "1.6 keeps the failed sandbox")
			require.Error(t, n.d.stopPod(pods[0]), "and cannot stop it: DEL fails")
		} else {
			require.Empty(t, pods, "2.4 forgets the sandbox whose teardown failed")
		}
		recs := n.w.records(n.net)
		require.Len(t, recs, 1)
		rec := readRecord(t, recs[0])
		require.Equal(t, "needs-teardown", rec["phase"])
		require.Len(t, n.w.ipamFiles(n.net), 1, "the record holds the bridge's IP")

		// the fault lasts until the agent's retry has failed at least once
		faulty := p.waitFor("a failed retry", 20*time.Second, func() (bool, string) {
			return p.metric("catena_teardown_retries_total", "outcome=error") > 0, "no failed retry yet"
		})
		failedRetries := p.metric("catena_teardown_retries_total", "outcome=error")
		assert.Len(t, n.w.ipamFiles(n.net), 1, "the IP is held while DEL fails")

		require.NoError(t, os.Remove(fault))
		took := p.waitFor("released by the agent's retry", 30*time.Second, func() (bool, string) {
			left := len(n.w.records(n.net))
			return left == 0, fmt.Sprintf("%d records", left)
		})
		// the pass that retried reports when it ends
		p.waitFor("the retry counted", 10*time.Second, func() (bool, string) {
			return p.metric("catena_teardown_retries_total", "outcome=ok") > 0, "no successful retry counted yet"
		})
		ips, veths := len(n.w.ipamFiles(n.net)), len(n.w.hostVeths())
		assert.Zero(t, ips, "IP released")
		assert.Zero(t, veths, "veth deleted")
		fams := p.scrape()
		passes := sampleSum(fams, "catena_reconcile_passes_total")
		runtimeErrors := sampleSum(fams, "catena_reconcile_runtime_errors_total")
		okRetries := sampleSum(fams, "catena_teardown_retries_total", "outcome=ok")
		assert.Equal(t, passes, runtimeErrors, "no pass reached a runtime: every ListPodSandbox failed")
		assert.Equal(t, 1.0, okRetries)
		assert.Zero(t, sampleSum(fams, "catena_reconcile_reclaimed_total"))
		retries := n.opsOf("RETRY")
		require.NotEmpty(t, retries)
		assert.Equal(t, "ok", retries[len(retries)-1].Outcome)
		assert.Empty(t, n.opsOf("RECLAIM", "ABANDON"))
		n.requireTombstones("RETRY", rec["key"].(map[string]any)["containerID"].(string))

		if n.v.legacy {
			require.NoError(t, n.d.stopPod(pods[0]), "1.6 stops the sandbox once Catena has released it")
			require.NoError(t, n.d.removePod(pods[0]))
		}
		n.requireNothingHeld(pods...)
		fmt.Printf("reconcile forgotten teardown, containerd %s: RunPodSandbox failed, sandboxes left %d, record needs-teardown holding 1 IP; "+
			"%.0f failed retries during %s of fault (until the first failed retry); released %s after the fault was lifted by %d RETRY ops (%.0f ok); "+
			"%.0f passes, %.0f of them runtime errors (no runtime reachable), 0 reclaimed; left: %d IPs, %d veths\n",
			n.v.name, len(pods), failedRetries, faulty.Round(time.Millisecond), took.Round(time.Millisecond), len(retries), okRetries, passes, runtimeErrors, ips, veths)
	})
}
