package integration

import (
	"sync"
	"testing"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTwoSandboxesOfOnePodAtOnce: kubelet can start a second sandbox of a
// pod while the first one's ADD still runs, under another container ID
// and netns but the same K8S_POD_* arguments. Both ADDs run at once
// through [bridge + host-local, portmap, tuning]; each gets its own
// address, record and veth; the DEL of one frees only its own, and the
// other keeps its address in its netns.
func TestTwoSandboxesOfOnePodAtOnce(t *testing.T) {
	w := newWorld(t)
	const net = "ittwosb"
	list := w.catenaList(net, "1.1.0", w.bridgeDelegate(), portmapDelegate, tuningDelegate)
	pod := [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", "web"}, {"K8S_POD_UID", "u-1"}}
	var rts []*libcni.RuntimeConf
	for _, s := range []string{"sb1", "sb2"} {
		id := w.id + "-" + s
		rt := w.rt(id, nil)
		rt.NetNS = w.addNetns(id)
		rt.Args = append(pod, [2]string{"K8S_POD_INFRA_CONTAINER_ID", id})
		rts = append(rts, rt)
	}
	addrs := make([]string, len(rts))
	errs := make([]error, len(rts))
	var wg sync.WaitGroup
	for i, rt := range rts {
		wg.Go(func() {
			res, err := w.cni.AddNetworkList(bg, list, rt)
			if errs[i] = err; err != nil {
				return
			}
			r, err := current.NewResultFromResult(res)
			if errs[i] = err; err == nil && len(r.IPs) == 1 {
				addrs[i] = r.IPs[0].Address.String()
			}
		})
	}
	wg.Wait()
	for i := range rts {
		require.NoError(t, errs[i], "ADD of sandbox %d", i+1)
		require.NotEmpty(t, addrs[i], "sandbox %d has one address", i+1)
		assert.Equal(t, []string{addrs[i]}, w.sandboxAddrsOf(rts[i].NetNS, "eth0"))
	}
	assert.NotEqual(t, addrs[0], addrs[1], "two sandboxes, two addresses")
	assert.Len(t, w.records(net), 2)
	assert.Len(t, w.hostVeths(), 2)
	assert.Len(t, w.ipamFiles(net), 2)

	require.NoError(t, w.cni.DelNetworkList(bg, list, rts[0]))
	assert.Len(t, w.records(net), 1, "only the first sandbox's record is gone")
	assert.Len(t, w.hostVeths(), 1)
	assert.Len(t, w.ipamFiles(net), 1)
	assert.Equal(t, []string{addrs[1]}, w.sandboxAddrsOf(rts[1].NetNS, "eth0"), "the second keeps its address")
	require.NoError(t, w.cni.CheckNetworkList(bg, list, rts[1]))

	require.NoError(t, w.cni.DelNetworkList(bg, list, rts[1]))
	assert.Empty(t, w.records(net))
	assert.Empty(t, w.hostVeths())
	assert.Empty(t, w.ipamFiles(net))
}
