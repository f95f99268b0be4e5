package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReconcileAgentRestartBetweenPhases: an attachment made through the
// generated conflist as a CRI runtime makes it (K8S_POD_INFRA_CONTAINER_ID),
// whose sandbox the real containerd does not list. `catena-agent run`
// (200 ms, grace 3 s) marks it and is killed with SIGKILL right after;
// 1 s later a new agent starts. The mark survives byte for byte, the new
// agent never marks again, and the attachment is reclaimed no earlier than
// grace after the first mark and earlier than a forgotten mark would
// allow (restart + grace).
func TestReconcileAgentRestartBetweenPhases(t *testing.T) {
	const (
		interval = 200 * time.Millisecond
		grace    = 3 * time.Second
		down     = time.Second
	)
	onBothContainerds(t, func(t *testing.T, n *agentNode) {
		flags := n.reconcileFlags(interval, grace)
		first := n.useChain(flags, n.w.bridgeDelegate(), portmapDelegate)
		list, err := libcni.ConfListFromFile(filepath.Join(n.confDir, generatedName))
		require.NoError(t, err)
		id := "lost-" + n.w.id
		ns := n.w.addNetns(n.w.id + "-lost")
		rt := &libcni.RuntimeConf{ContainerID: id, NetNS: ns, IfName: "eth0",
			Args:           [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", "lost"}, {"K8S_POD_INFRA_CONTAINER_ID", id}},
			CapabilityArgs: map[string]any{"portMappings": portMapping(int(hostPort()))["portMappings"]}}
		_, err = n.w.cni.AddNetworkList(bg, list, rt)
		require.NoError(t, err)
		t.Cleanup(func() { _ = n.w.cni.DelNetworkList(bg, list, rt) })
		require.Positive(t, iptablesMentions(t, id))
		// the sandbox is gone, and so is its netns: under an empty list,
		// a pinned one with no process would be no proof
		run(t, "ip", "netns", "del", n.w.id+"-lost")

		first.waitFor("marked", 2*grace, func() (bool, string) {
			return exists(t, n.markPath(id)), "no mark yet"
		})
		require.NoError(t, first.cmd.Process.Kill())
		<-first.exited
		killedAt := time.Now()
		mark, err := os.ReadFile(n.markPath(id))
		require.NoError(t, err)
		var m struct {
			MarkedAt time.Time `json:"markedAt"`
		}
		require.NoError(t, json.Unmarshal(mark, &m))
		require.Less(t, time.Since(m.MarkedAt), grace-down, "killed well before phase two")

		time.Sleep(down)
		require.True(t, exists(t, n.recordPath(id)), "nothing reclaimed while no agent runs")
		second := n.startRun(flags...)
		restarted := time.Now()
		changed := 0
		gone := second.waitFor("reclaimed by the new agent", 4*grace, func() (bool, string) {
			if raw, err := os.ReadFile(n.markPath(id)); err == nil && !bytes.Equal(raw, mark) {
				changed++
			}
			return !exists(t, n.recordPath(id)), "record still there"
		})
		goneAt := restarted.Add(gone)
		reclaims := n.reclaimsCounted(second, 1)
		afterMark := goneAt.Sub(m.MarkedAt)
		assert.Zero(t, changed, "the mark was never rewritten")
		assert.GreaterOrEqual(t, afterMark, grace, "never reclaimed before grace after the mark")
		require.Len(t, reclaims, 1)
		// when the reclaim began, not when its teardown ended
		assert.True(t, reclaims[0].Start.Before(restarted.Add(grace)), "reclaimed %s after the restart: the new agent kept the old mark (a new one would wait %s)",
			reclaims[0].Start.Sub(restarted), grace)
		marked := second.metric("catena_reconcile_marked_total")
		assert.Zero(t, marked, "the new agent did not mark again")
		assert.Equal(t, "ok", reclaims[0].Outcome)
		assert.Zero(t, iptablesMentions(t, id))
		assert.Empty(t, n.w.ipamFiles(n.net))
		assert.Empty(t, n.w.hostVeths())
		assert.False(t, exists(t, n.markPath(id)), "the mark is cleared")
		fmt.Printf("reconcile agent restart, containerd %s: marked, agent SIGKILLed %s after the mark, down %s (and its restart); the new agent reclaimed %s after its start, %s after the mark (grace %s); "+
			"mark rewritten %d times, new agent's marks %.0f; IP, veth, DNAT rule, record released\n",
			n.v.name, killedAt.Sub(m.MarkedAt).Round(time.Millisecond), down, gone.Round(time.Millisecond), afterMark.Round(time.Millisecond), grace, changed, marked)
	})
}
