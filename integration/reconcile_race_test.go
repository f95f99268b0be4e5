package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReconcileWhereaboutsRace is whereabouts #162/#207 for real: the chain
// [bridge + host-local, failer sleeping 5 s in ADD, portmap] under a real
// containerd, with `catena-agent run` reconciling every 200 ms with a 2 s
// grace. While RunPodSandbox is in flight the attachment has a record and
// an IP but no sandbox; no pass may reclaim it, during the ADD or after.
// When RunPodSandbox returns its IP, veth, DNAT rule and record are intact,
// and stay so for more than the grace; Stop/Remove then release them.
func TestReconcileWhereaboutsRace(t *testing.T) {
	const (
		interval = 200 * time.Millisecond
		grace    = 2 * time.Second
		hang     = 5 * time.Second
	)
	onBothContainerds(t, func(t *testing.T, n *agentNode) {
		p := n.useChain(n.reconcileFlags(interval, grace), n.w.bridgeDelegate(),
			failer(fmt.Sprintf(`"hangAdd":%q`, hang)), portmapDelegate)
		passes0 := p.metric("catena_reconcile_passes_total")

		type runResult struct {
			id  string
			err error
		}
		done := make(chan runResult, 1)
		start := time.Now()
		go func() {
			id, err := n.d.runPod(n.d.podConfig("race", hostPort()))
			done <- runResult{id, err}
		}()
		// watch the ADD: the record and the IP appear, and neither goes
		sawRecord, maxListed, ipLost := false, 0, 0
		var res runResult
	watch:
		for {
			select {
			case res = <-done:
				break watch
			case <-time.After(50 * time.Millisecond):
			}
			recs, ips := len(n.w.records(n.net)), len(n.w.ipamFiles(n.net))
			if recs == 1 && ips == 1 {
				sawRecord = true
			} else if sawRecord {
				ipLost++
			}
			// Only while the ADD surely runs (it sleeps hang in the
			// failer): containerd 2.4 may list the sandbox in the
			// moment between the ADD's end and RunPodSandbox's return.
			if time.Since(start) < hang {
				maxListed = max(maxListed, len(n.d.pods()))
			}
		}
		took := time.Since(start)
		require.NoError(t, res.err, n.d.logTail())
		passesDuringAdd := p.metric("catena_reconcile_passes_total") - passes0
		require.GreaterOrEqual(t, took, hang, "the ADD slept in the failer")
		assert.True(t, sawRecord, "the record and the IP existed during the ADD")
		assert.Zero(t, ipLost, "the record or the IP vanished during the ADD")
		assert.Zero(t, maxListed, "no sandbox is listed during its ADD: the race is real")
		assert.GreaterOrEqual(t, passesDuringAdd, float64((hang-grace)/interval), "passes ran during the ADD, also past the grace")

		intact := func(when string) {
			t.Helper()
			_, ip, err := n.d.podStatus(res.id)
			require.NoError(t, err)
			ips := n.w.ipamFiles(n.net)
			require.Len(t, ips, 1, when)
			assert.Equal(t, ip, ips[0], "%s: host-local holds the sandbox's IP", when)
			assert.Len(t, n.w.hostVeths(), 1, "%s: the veth", when)
			assert.Positive(t, iptablesMentions(t, res.id), "%s: the DNAT rule", when)
			assert.True(t, exists(t, n.recordPath(res.id)), "%s: the record", when)
			assert.False(t, exists(t, n.markPath(res.id)), "%s: no mark", when)
		}
		intact("when RunPodSandbox returned")
		// more than the grace again, so that a mark made during the ADD
		// would have been reclaimed
		time.Sleep(grace + 5*interval)
		intact("after grace + 5 intervals")
		passes := p.metric("catena_reconcile_passes_total") - passes0
		reclaimed := p.metric("catena_reconcile_reclaimed_total")
		marked := p.metric("catena_reconcile_marked_total")
		assert.Zero(t, reclaimed, p.logText())
		assert.Zero(t, marked, p.logText())
		assert.Empty(t, n.opsOf("RECLAIM", "RETRY", "ABANDON"), "no teardown but the runtime's")
		assert.NotContains(t, p.logText(), "reconcile: reclaimed")

		require.NoError(t, n.d.stopPod(res.id), n.d.logTail())
		require.NoError(t, n.d.removePod(res.id), n.d.logTail())
		n.requireNothingHeld(res.id)
		assert.Empty(t, n.w.records(n.net))
		dels := n.opsOf("DEL")
		require.NotEmpty(t, dels, "Stop sent DEL")
		for _, op := range dels {
			assert.Equal(t, "ok", op.Outcome, "%+v", op)
		}
		fmt.Printf("reconcile race, containerd %s: RunPodSandbox took %s with a %s ADD; %.0f passes every %s (grace %s) during the ADD, "+
			"%.0f in all; sandboxes listed during the ADD: %d; marked %.0f, reclaimed %.0f; IP, veth, DNAT rule and record intact, released by Stop/Remove\n",
			n.v.name, took.Round(time.Millisecond), hang, passesDuringAdd, interval, grace, passes, maxListed, marked, reclaimed)
	})
}
