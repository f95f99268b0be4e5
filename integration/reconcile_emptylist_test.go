package integration

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/node/reconcile"
)

// podProcess runs a process in the netns name, as a sandbox's pause
// process is; stop kills it and waits for it.
func (w *world) podProcess(name string) (stop func()) {
	w.t.Helper()
	cmd := exec.Command("ip", "netns", "exec", name, "sleep", "600")
	require.NoError(w.t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	stop = func() {
		_ = cmd.Process.Kill()
		<-done
	}
	w.t.Cleanup(stop)
	return stop
}

// TestReconcileEmptyListKeepsLivePods: 5 attachments made
// through Catena as a CRI runtime makes them, each in its own netns with a
// process in it (their pods run), and a CRI endpoint that answers
// ListPodSandbox with an empty list (a wrong --runtime-endpoint). Two
// `catenactl reconcile --grace 1s` passes, a grace apart, mark and reclaim
// nothing: IPs, veths and records stay, and each decision says why. Then
// the processes exit, their netns left pinned (a CRI-O pod with
// drop_infra_ctr whose containers wait to restart looks just so): two more
// passes a grace apart still mark and reclaim nothing, each kept for want
// of proof. Then the netns files go (the sandboxes are gone): the next two
// passes mark and reclaim all 5, each proved gone by its netns.
func TestReconcileEmptyListKeepsLivePods(t *testing.T) {
	const pods = 5
	grace := time.Second
	w := newWorld(t)
	net := "empty-" + w.id
	list := w.catenaList(net, "1.1.0", w.bridgeDelegate())
	c := w.newCtl(net, w.bridgeDelegate())
	var ids, names []string
	var stops []func()
	for i := range pods {
		name := fmt.Sprintf("%s-p%d", w.id, i)
		names = append(names, name)
		ns := w.addNetns(name)
		stops = append(stops, w.podProcess(name))
		id := fmt.Sprintf("pod%d-%s", i, w.id)
		rt := &libcni.RuntimeConf{ContainerID: id, NetNS: ns, IfName: "eth0",
			Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", "p"}, {"K8S_POD_INFRA_CONTAINER_ID", id}}}
		_, err := w.cni.AddNetworkList(context.Background(), list, rt)
		require.NoError(t, err)
		t.Cleanup(func() { _ = w.cni.DelNetworkList(context.Background(), list, rt) })
		ids = append(ids, id)
	}
	require.Len(t, w.ipamFiles(net), pods)
	require.Len(t, w.hostVeths(), pods)

	srv := startFakeCRI(t)
	sock := srv.sock
	srv.Set() // lists no sandboxes
	args := []string{"reconcile", "--runtime-endpoint", sock, "--grace", grace.String(), "--runtime-timeout", "2s"}

	time.Sleep(grace) // the records are older than the grace
	rep := jsonOf[reconcile.Report](c, 0, args...)
	assert.Zero(t, rep.Sandboxes)
	assert.Equal(t, pods, rep.InScope)
	for _, d := range rep.Decisions {
		assert.Equal(t, reconcile.ActAlive, d.Action, "%s: %s", d.Key.ContainerID, d.Reason)
		assert.Contains(t, d.Reason, "(sleep) is in the netns of its ADD", d.Key.ContainerID)
	}
	time.Sleep(grace)
	out, stderr, code := c.run(args...)
	require.Zero(t, code, stderr)
	for _, id := range ids {
		assert.Contains(t, out, id, "the table says why it is kept")
	}
	assert.Contains(t, out, "not listed by the runtime, but pid")
	assert.Contains(t, out, "0 candidates, 0 marked, 0 reclaimed")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	summaryLine := lines[len(lines)-1]
	ips, veths, recs := len(w.ipamFiles(net)), len(w.hostVeths()), len(w.records(net))
	assert.Equal(t, pods, ips, "IPs kept")
	assert.Equal(t, pods, veths, "veths kept")
	assert.Equal(t, pods, recs, "records kept")
	fmt.Printf("reconcile empty list, pods alive: 2 passes a grace (%s) apart: first %d marked, %d reclaimed; second %q; IPs %d -> %d, veths %d -> %d, records %d -> %d\nfirst row of the table: %s\n",
		grace, rep.Marked, rep.Reclaimed, summaryLine, pods, ips, pods, veths, pods, recs, lines[1])

	// the pods' processes exit: their netns is left pinned, with no
	// process in it: no proof
	for _, stop := range stops {
		stop()
	}
	for range 2 {
		rep = jsonOf[reconcile.Report](c, 0, args...)
		assert.Zero(t, rep.Marked, "a pinned netns with no process is no proof")
		assert.Zero(t, rep.Reclaimed)
		for _, d := range rep.Decisions {
			assert.Equal(t, reconcile.ActKept, d.Action, "%s: %s", d.Key.ContainerID, d.Reason)
			assert.Contains(t, d.Reason, "is still that of its ADD, and no process is in it")
		}
		time.Sleep(grace)
	}
	assert.Len(t, w.ipamFiles(net), pods, "IPs kept while the netns is pinned")
	assert.Len(t, w.hostVeths(), pods, "veths kept while the netns is pinned")

	// the netns files go: proof
	for _, name := range names {
		run(t, "ip", "netns", "del", name)
	}
	rep = jsonOf[reconcile.Report](c, 0, args...)
	assert.Equal(t, pods, rep.Marked)
	for _, d := range rep.Decisions {
		assert.Equal(t, reconcile.ActMarked, d.Action, "%s: %s", d.Key.ContainerID, d.Reason)
		assert.Contains(t, d.Reason, "is gone, and no process is in the namespace of its ADD")
	}
	time.Sleep(grace)
	rep = jsonOf[reconcile.Report](c, 0, args...)
	assert.Equal(t, pods, rep.Reclaimed)
	ips, veths, recs = len(w.ipamFiles(net)), len(w.hostVeths()), len(w.records(net))
	assert.Zero(t, ips, "IPs released")
	assert.Zero(t, veths, "veths deleted")
	assert.Zero(t, recs, "records gone")
	fmt.Printf("reconcile empty list, pods gone (netns deleted): %d marked, then %d reclaimed; IPs, veths, records left: %d, %d, %d\n",
		pods, rep.Reclaimed, ips, veths, recs)
}
