package integration

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// delFailedSince is when the first step whose DEL failed began failing,
// from id's record.
func (n *agentNode) delFailedSince(id string) time.Time {
	n.t.Helper()
	rec := readRecord(n.t, n.recordPath(id))
	steps, _ := rec["steps"].([]any)
	for _, s := range steps {
		step, _ := s.(map[string]any)
		if since, ok := step["delFailedSince"].(string); ok {
			at, err := time.Parse(time.RFC3339Nano, since)
			require.NoError(n.t, err)
			return at
		}
	}
	n.t.Fatalf("record of %s has no step whose DEL failed: %v", id, rec)
	return time.Time{}
}

// TestReconcileAbandonAfter: the chain [bridge + host-local, failer whose
// DEL always fails, portmap] under a real containerd. The sandbox runs;
// its Stop fails in the failer, leaving a record that needs teardown and
// holds the IP.
//   - abandonAfter off: `catena-agent run` retries and fails, for ever; the
//     IP stays held and catena_held_attachments and
//     catena_oldest_held_attachment_age_seconds show it.
//   - abandonAfter 4 s: a new agent abandons the failer no earlier than 4 s
//     after its DEL first failed, the teardown continues (IP and veth
//     freed, record gone), and the ABANDON event and the metrics count it.
//     Stop and Remove then succeed.
func TestReconcileAbandonAfter(t *testing.T) {
	const (
		interval     = 200 * time.Millisecond
		grace        = 2 * time.Second
		abandonAfter = 4 * time.Second
		heldFor      = 2 * time.Second
	)
	onBothContainerds(t, func(t *testing.T, n *agentNode) {
		fault := filepath.Join(t.TempDir(), "fault")
		touch(t, fault) // removed at cleanup: the delegate's DEL fails until then
		flags := n.reconcileFlags(interval, grace)
		off := n.useChain(flags, n.w.bridgeDelegate(), failer(fmt.Sprintf(`"failDel":true,"faultFile":%q`, fault)), portmapDelegate)
		id, err := n.d.runPod(n.d.podConfig("abandon", hostPort()))
		require.NoError(t, err, n.d.logTail())
		require.Error(t, n.d.stopPod(id), "Stop fails: the failer's DEL fails")
		failing := n.delFailedSince(id)

		// off: held, for as long as it lasts; the gauges are set at the
		// end of each pass
		var fams map[string]*dto.MetricFamily
		off.waitFor("held a while, and retried", 4*heldFor, func() (bool, string) {
			fams = off.scrape()
			oldest := sampleSum(fams, "catena_oldest_held_attachment_age_seconds")
			retries := sampleSum(fams, "catena_teardown_retries_total", "outcome=error")
			return oldest >= (heldFor-2*interval).Seconds() && retries > 0, fmt.Sprintf("oldest held %.2fs, %.0f failed retries", oldest, retries)
		})
		held, oldest := sampleSum(fams, "catena_held_attachments"), sampleSum(fams, "catena_oldest_held_attachment_age_seconds")
		failedRetries := sampleSum(fams, "catena_teardown_retries_total", "outcome=error")
		assert.Equal(t, 1.0, held)
		assert.GreaterOrEqual(t, oldest, (heldFor - 2*interval).Seconds(), "the oldest held attachment's age")
		assert.LessOrEqual(t, oldest, time.Since(failing).Seconds())
		assert.Positive(t, failedRetries)
		assert.Zero(t, sampleSum(fams, "catena_abandoned_delegates_total"))
		assert.Len(t, n.w.ipamFiles(n.net), 1, "off: the IP stays held")
		assert.True(t, exists(t, n.recordPath(id)))
		assert.Empty(t, n.opsOf("ABANDON"))
		require.Zero(t, off.stop(), off.logText())

		// on
		on := n.startRun(append(flags, "--abandon-after", abandonAfter.String())...)
		on.waitFor("the record released", 4*abandonAfter, func() (bool, string) {
			return !exists(t, n.recordPath(id)), "record still there"
		})
		on.waitFor("the abandon counted", 10*time.Second, func() (bool, string) {
			return on.metric("catena_abandoned_delegates_total") == 1, "not counted yet"
		})
		abandons := n.opsOf("ABANDON")
		require.Len(t, abandons, 1)
		after := abandons[0].Start.Sub(failing)
		assert.GreaterOrEqual(t, after, abandonAfter, "abandoned no earlier than abandonAfter after the first failed DEL")
		fams = on.scrape()
		abandoned := sampleSum(fams, "catena_abandoned_delegates_total")
		okRetries := sampleSum(fams, "catena_teardown_retries_total", "outcome=ok")
		assert.Equal(t, 1.0, okRetries, "the teardown continued past the abandoned delegate")
		assert.Equal(t, 1.0, sampleSum(fams, "catena_operations_total", "verb=abandon"))
		assert.Contains(t, on.logText(), "delegate abandoned")
		ips, veths := len(n.w.ipamFiles(n.net)), len(n.w.hostVeths())
		assert.Zero(t, ips, "on: the IP is freed")
		assert.Zero(t, veths)
		assert.Zero(t, iptablesMentions(t, id))
		on.waitFor("nothing held", 10*time.Second, func() (bool, string) {
			return on.metric("catena_held_attachments") == 0, "still held"
		})

		require.NoError(t, n.d.stopPod(id), "Stop succeeds once Catena let go")
		require.NoError(t, n.d.removePod(id))
		n.requireNothingHeld(id)
		fmt.Printf("reconcile abandonAfter, containerd %s: off: after %s held %.0f, oldest held age %.1fs, %.0f failed retries, IP held, 0 abandoned; "+
			"on (%s): abandoned %s after the first failed DEL, %.0f abandoned, %.0f retry ok; left: %d IPs, %d veths, 0 records\n",
			n.v.name, heldFor, held, oldest, failedRetries, abandonAfter, after.Round(time.Millisecond), abandoned, okRetries, ips, veths)
	})
}
