package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/node/reconcile"
)

// TestReconcileScopeAndUnreachableRuntime drives the real catenactl
// reconcile over a real chain [bridge + host-local, portmap with a
// mapping]: one attachment made as a CRI runtime makes it
// (K8S_POD_INFRA_CONTAINER_ID) and one made by cnitool, on the same
// network.
//   - Runtime unreachable (no socket): many passes reclaim and mark nothing,
//     exit 1, and the report says why.
//   - A runtime that lists no sandbox: the CRI attachment is marked, then
//     reclaimed after the grace period (IP, veth, iptables rule, record
//     gone); the cnitool one is untouched after many passes.
func TestReconcileScopeAndUnreachableRuntime(t *testing.T) {
	w := newWorld(t)
	net := "rec-" + w.id
	list := w.catenaList(net, "1.1.0", w.bridgeDelegate(), portmapDelegate)
	c := w.newCtl(net, w.bridgeDelegate(), portmapDelegate)
	criNetns := w.addNetns(w.id + "-cri")
	criID := "cri-" + w.id
	port := int(hostPort())
	_, err := w.cni.AddNetworkList(context.Background(), list, &libcni.RuntimeConf{ContainerID: criID, NetNS: criNetns, IfName: "eth0",
		Args:           [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", "web"}, {"K8S_POD_INFRA_CONTAINER_ID", criID}},
		CapabilityArgs: map[string]any{"portMappings": portMapping(port)["portMappings"]}})
	require.NoError(t, err)
	tool := w.cnitool(net, list.Bytes, "")
	_, err = tool.run("add", net, w.netns)
	require.NoError(t, err)
	toolID := cnitoolContainerID(w.netns)
	require.Len(t, w.ipamFiles(net), 2)
	require.Len(t, w.records(net), 2)
	require.Positive(t, iptablesMentions(t, criID))

	grace := 300 * time.Millisecond
	args := func(sock string) []string {
		return []string{"reconcile", "--runtime-endpoint", sock, "--grace", grace.String(), "--runtime-timeout", "2s"}
	}
	missing := filepath.Join(t.TempDir(), "gone.sock")
	for range 5 {
		rep := jsonOf[reconcile.Report](c, 1, args(missing)...)
		assert.Contains(t, rep.RuntimeError, "ListPodSandbox")
		assert.Equal(t, 1, rep.Kept)
		assert.Contains(t, rep.KeptCause, "runtime error")
		assert.Zero(t, rep.Marked+rep.Reclaimed)
		time.Sleep(grace)
	}
	_, stderr, _ := c.run(args(missing)...)
	assert.Contains(t, stderr, "nothing reclaimed in this pass")
	require.Len(t, w.records(net), 2, "nothing reclaimed while the runtime is unreachable")

	srv := startFakeCRI(t)
	sock := srv.sock
	srv.Set("some-other-sandbox")
	passes, reclaimed, marked := 0, 0, 0
	for range 10 {
		rep := jsonOf[reconcile.Report](c, 0, args(sock)...)
		passes++
		reclaimed += rep.Reclaimed
		marked += rep.Marked
		for _, d := range rep.Decisions {
			if d.Key.ContainerID == toolID {
				assert.Equal(t, reconcile.ActOutOfScope, d.Action)
			}
		}
		time.Sleep(grace / 2)
	}
	assert.Equal(t, 1, marked)
	assert.Equal(t, 1, reclaimed)
	assert.Zero(t, iptablesMentions(t, criID), "the CRI attachment's DNAT rule is gone")
	recs := w.records(net)
	require.Len(t, recs, 1)
	assert.Contains(t, recs[0], toolID, "the cnitool record is untouched")
	assert.Len(t, w.ipamFiles(net), 1, "only the cnitool attachment's IP is left")
	assert.Len(t, w.sandboxAddrsOf(criNetns, "eth0"), 0, "the CRI sandbox lost its address")
	assert.Len(t, w.sandboxAddrs("eth0"), 1, "the cnitool sandbox kept its address")
	assert.Len(t, w.hostVeths(), 1)

	_, err = tool.run("del", net, w.netns)
	require.NoError(t, err)
	assertNothingHeld(t, w, net, toolID)
	fmt.Printf("reconcile scope: %d passes unreachable (0 reclaimed), %d passes with the runtime: %d marked, %d reclaimed, cnitool record untouched\n",
		6, passes, marked, reclaimed)
}
