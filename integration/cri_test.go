package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// hostPort is a host port unique to this process and call.
func hostPort() int32 {
	return int32(40000 + (os.Getpid()%1000)*20 + int(seq.Add(1))%20)
}

// libcniEntries lists libcni's cached results naming container id.
func libcniEntries(t *testing.T, id string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(libcniResults, "*-"+id+"-*"))
	require.NoError(t, err)
	return m
}

// TestCRISandboxLifecycleThroughCatena: containerd's CRI runs a sandbox
// through Catena [bridge + host-local, portmap]. The IP the CRI reports is
// the one host-local handed out and Catena recorded; Stop tears everything
// down (IP, veth, DNAT rules, record), and Remove's second DEL round (both
// 1.6 and 2.4 send one; 2.4's has an empty CNI_NETNS and no prevResult)
// finds no record and succeeds invoking nothing.
func TestCRISandboxLifecycleThroughCatena(t *testing.T) {
	for _, v := range []containerdVersion{containerd24(), containerd16()} {
		t.Run("containerd "+v.name, func(t *testing.T) {
			w := newWorld(t)
			net := "crilife-" + w.id
			list := w.catenaList(net, v.cniVersion(), w.bridgeDelegate(), portmapDelegate)
			d := startContainerd(t, v, string(list.Bytes))

			id, err := d.runPod(d.podConfig("life", hostPort()))
			require.NoError(t, err, d.logTail())
			state, ip, err := d.podStatus(id)
			require.NoError(t, err)
			assert.Equal(t, cri.PodSandboxState_SANDBOX_READY, state)
			require.NotEmpty(t, ip, "PodSandboxStatus reports the sandbox IP")
			assert.Equal(t, []string{ip}, w.ipamFiles(net), "the IP host-local handed out")
			assert.Len(t, w.hostVeths(), 1)
			assert.Positive(t, iptablesMentions(t, id), "portmap's DNAT rules for the sandbox")
			recs := w.records(net)
			require.Len(t, recs, 1)
			assert.Contains(t, recs[0], id)
			rec := readRecord(t, recs[0])
			assert.Equal(t, "complete", rec["phase"])
			assert.Contains(t, fmt.Sprint(rec), ip, "the record holds the result with the IP")

			require.NoError(t, d.stopPod(id), d.logTail())
			state, _, err = d.podStatus(id)
			require.NoError(t, err)
			assert.Equal(t, cri.PodSandboxState_SANDBOX_NOTREADY, state)
			assert.Empty(t, w.ipamFiles(net), "no IP held after Stop")
			assert.Empty(t, w.hostVeths(), "no veth after Stop")
			assert.Zero(t, iptablesMentions(t, id), "no iptables rule after Stop")
			assert.Empty(t, w.records(net), "no record after Stop")
			dels := opsFor(catenaOps(t, w.cacheDir), "DEL", id)
			require.Len(t, dels, 1, "Stop sends one DEL")
			assert.Equal(t, "ok", dels[0].Outcome)
			assert.Len(t, dels[0].Calls, 2, "Stop's DEL tears down both delegates")

			require.NoError(t, d.removePod(id), d.logTail())
			assert.Empty(t, d.pods())
			assert.Empty(t, w.ipamFiles(net))
			assert.Empty(t, w.records(net))
			assert.Empty(t, libcniEntries(t, id), "libcni's cache holds nothing of the sandbox")
			dels = opsFor(catenaOps(t, w.cacheDir), "DEL", id)
			require.Len(t, dels, 2, "Remove sends a second DEL round")
			assert.Equal(t, "ok", dels[1].Outcome)
			assert.Empty(t, dels[1].Calls, "no record: the second DEL invokes nothing")
		})
	}
}

// TestCRIStatusReachesCatena: for a 1.1.0 conflist, containerd 2.4's CRI
// Status call runs CNI STATUS, which Catena forwards to its delegates. A
// delegate that is not available makes the CRI report the network not
// ready, with Catena's message naming that delegate; once it is available
// again the network is ready.
func TestCRIStatusReachesCatena(t *testing.T) {
	w := newWorld(t)
	net := "cristatus-" + w.id
	dir := t.TempDir()
	fault, logFile := filepath.Join(dir, "fault"), filepath.Join(dir, "failer.log")
	require.NoError(t, os.WriteFile(fault, nil, 0o600))
	list := w.catenaList(net, "1.1.0", w.bridgeDelegate(),
		failer(fmt.Sprintf(`"failStatus":true,"faultFile":%q,"logFile":%q`, fault, logFile)))
	d := startContainerd(t, containerd24(), string(list.Bytes))

	ready, msg := d.networkReady()
	assert.False(t, ready, "a delegate is unavailable")
	assert.Contains(t, msg, "delegate 1 (failer)", "Catena names the delegate")
	assert.Contains(t, msg, "failer: injected STATUS failure")

	require.NoError(t, os.Remove(fault))
	ready, msg = d.networkReady()
	assert.True(t, ready, msg)

	raw, err := os.ReadFile(logFile)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, strings.Count(string(raw), "STATUS "), 2, "each CRI Status call reached the delegate through Catena")
}
