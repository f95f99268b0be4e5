package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestAgentInstallAdoptsPreexistingPod is §4 (1) and (2): a sandbox runs
// through the plain primary [bridge + host-local, portmap]; `install
// --once` adopts it from libcni's cache and puts Catena in front; a new
// sandbox goes through Catena; Stop and Remove of both leave no IP, veth,
// iptables rule, record or libcni cache entry. Without the adoption, the
// first sandbox's DEL would reach Catena with no record and free nothing.
func TestAgentInstallAdoptsPreexistingPod(t *testing.T) {
	onBothContainerds(t, func(t *testing.T, n *agentNode) {
		w, d := n.w, n.d

		oldID, err := d.runPod(d.podConfig("before", hostPort()))
		require.NoError(t, err, d.logTail())
		_, oldIP, err := d.podStatus(oldID)
		require.NoError(t, err)
		require.Equal(t, []string{oldIP}, w.ipamFiles(n.net), "the primary's host-local handed out the IP")
		require.Positive(t, iptablesMentions(t, oldID), "the primary's portmap rules")
		require.Empty(t, w.records(n.net), "no Catena yet")

		start := time.Now()
		log := n.installOnce()
		took := time.Since(start)
		n.waitLoaded(true)
		assert.Contains(t, log, "adopted attachment")
		recs := w.records(n.net)
		require.Len(t, recs, 1, "the pre-existing sandbox is adopted")
		assert.Contains(t, recs[0], oldID)
		rec := readRecord(t, recs[0])
		assert.Equal(t, "complete", rec["phase"])
		steps, _ := rec["steps"].([]any)
		require.Len(t, steps, 2)
		for _, s := range steps {
			assert.Equal(t, "added", s.(map[string]any)["state"])
		}
		assert.Contains(t, fmt.Sprint(rec["result"]), oldIP)

		newID, err := d.runPod(d.podConfig("after", hostPort()))
		require.NoError(t, err, d.logTail())
		adds := opsFor(catenaOps(t, w.cacheDir), "ADD", newID)
		require.Len(t, adds, 1, "the new sandbox's ADD goes through Catena")
		assert.Equal(t, "ok", adds[0].Outcome)
		assert.Len(t, w.records(n.net), 2)
		assert.Len(t, w.ipamFiles(n.net), 2)
		assert.Len(t, w.hostVeths(), 2)

		for _, id := range []string{oldID, newID} {
			require.NoError(t, d.stopPod(id), d.logTail())
			require.NoError(t, d.removePod(id), d.logTail())
		}
		assert.Empty(t, d.pods())
		assert.Empty(t, w.ipamFiles(n.net), "no IP held")
		assert.Empty(t, w.hostVeths(), "no veth")
		assert.Zero(t, iptablesMentions(t, oldID), "no iptables rule of the adopted sandbox")
		assert.Zero(t, iptablesMentions(t, newID), "no iptables rule of the new sandbox")
		assert.Empty(t, w.records(n.net), "no record")
		assert.Empty(t, libcniEntries(t, oldID))
		assert.Empty(t, libcniEntries(t, newID))
		oldDels := opsFor(catenaOps(t, w.cacheDir), "DEL", oldID)
		require.NotEmpty(t, oldDels)
		assert.Equal(t, "ok", oldDels[0].Outcome)
		assert.Len(t, oldDels[0].Calls, 2, "the adopted sandbox's DEL tore down both delegates")
		t.Logf("containerd %s, install --once: 1 pre-existing sandbox adopted, install took %s; "+
			"after Stop+Remove of 2 sandboxes: %d IPs, %d veths, %d iptables mentions, %d records; adopted DEL calls %d",
			n.v.name, took.Round(time.Millisecond), len(w.ipamFiles(n.net)), len(w.hostVeths()),
			iptablesMentions(t, oldID)+iptablesMentions(t, newID), len(w.records(n.net)), len(oldDels[0].Calls))
	})
}

// stopRemoveAll stops and removes every sandbox, requiring success.
func (n *agentNode) stopRemoveAll() {
	n.t.Helper()
	for _, id := range n.d.pods() {
		require.NoError(n.t, n.d.stopPod(id), n.d.logTail())
		require.NoError(n.t, n.d.removePod(id), n.d.logTail())
	}
}

// requireNothingHeld: no sandbox, IP, veth, record; no iptables rule of ids.
func (n *agentNode) requireNothingHeld(ids ...string) {
	n.t.Helper()
	assert.Empty(n.t, n.d.pods())
	assert.Empty(n.t, n.w.ipamFiles(n.net), "no IP held")
	assert.Empty(n.t, n.w.hostVeths(), "no veth")
	for _, id := range ids {
		assert.Zero(n.t, iptablesMentions(n.t, id), "no iptables rule of %s", id)
	}
}

// readyPoll polls containerd's NetworkReady every 50ms until stop closes,
// and counts the polls and the not-ready answers (with their reasons).
type readyPoll struct {
	polls, notReady int
	reasons         []string
	errs            []string
	done            chan struct{}
}

func (n *agentNode) pollNetworkReady(stop <-chan struct{}) *readyPoll {
	p := &readyPoll{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			st, err := n.d.rt.Status(bg, &cri.StatusRequest{})
			p.polls++
			if err != nil {
				p.errs = append(p.errs, err.Error())
				continue
			}
			for _, c := range st.GetStatus().GetConditions() {
				if c.Type == cri.NetworkReady && !c.Status {
					p.notReady++
					p.reasons = append(p.reasons, strings.TrimSpace(c.Reason+": "+c.Message))
				}
			}
		}
	}()
	return p
}
