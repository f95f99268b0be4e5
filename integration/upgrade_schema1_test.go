package integration

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/integration/schema1"
)

// TestUpgradeSchema1NodeWithPodsRunning: a node that ran catena 1daa3b7
// (schema-1 records only) is upgraded with its pods running. Its records
// (integration/schema1: two complete pods, one from a 0.4.0 conflist; an
// ADD and a rollback that died; a failed rollback and a failed DEL, with
// their pending markers) are in the cache dir, and what their delegates
// hold is real: IPs, veths, portmap rules. This build's catena, driven as a
// runtime drives it, serves a new pod next to them and tears every one of
// them down, by DEL, by a repeated ADD and by GC, until nothing is left.
func TestUpgradeSchema1NodeWithPodsRunning(t *testing.T) {
	n := newS1Node(t)
	for _, att := range schema1.Attachments {
		n.replay(att)
	}
	require.True(t, n.newest.Before(time.Now()),
		"the records were made at %s, after this machine's clock: GC would spare them as too young", n.newest)
	require.Len(t, n.ipamFiles(schema1.Network), len(schema1.Attachments), "every record's IP is held")
	require.Len(t, n.hostVeths(), len(schema1.Attachments), "every record's veth is up")
	for _, att := range schema1.Attachments {
		ipFile, rules, record, marker := n.holds(att.ContainerID, att.IP)
		require.Equal(t, []bool{true, true, true, att.Pending}, []bool{ipFile, rules, record, marker}, att.ContainerID)
	}
	a, b, c := schema1.ByID("s1-a-complete"), schema1.ByID("s1-b-rollback-failed"), schema1.ByID("s1-c-del-failed")
	d, e, f := schema1.ByID("s1-d-v040-complete"), schema1.ByID("s1-e-crashed-add"), schema1.ByID("s1-f-crashed-rollback")

	// The failers of b and c fail DEL while the fault file exists.
	require.NoError(t, os.WriteFile(schema1.FaultFile, nil, 0o600))

	// A new pod next to the old records. Its ADD then starts a retrier,
	// which retries the old teardowns that are due (b's empty marker: due
	// at once), which fail.
	newPod := n.rt("s1-n-new", n.addNetns("catena-s1-n"), 39707)
	res, err := n.cni.AddNetworkList(bg, n.list, newPod)
	require.NoError(t, err)
	n.delAtCleanup(newPod)
	r, err := current.NewResultFromResult(res)
	require.NoError(t, err)
	require.Len(t, r.IPs, 1)
	newIP := r.IPs[0].Address.String()
	assert.Equal(t, []string{newIP}, n.sandboxAddrsOf(newPod.NetNS, schema1.IfName))
	assert.Positive(t, iptablesMentions(t, newPod.ContainerID))
	reapRetriers(t, n.cacheDir, 2*time.Minute)
	assert.Equal(t, "v1 ", n.markerPrefix(b.ContainerID), "b's retry failed: this build rewrote the old build's empty marker")

	// c's DEL fails again on the failer's DEL: the record (now with this
	// build's entries) and a marker stay.
	err = n.cni.DelNetworkList(bg, n.list, n.rt(c.ContainerID, c.NetNS, c.HostPort))
	var cniErr *types.Error
	if assert.True(t, errors.As(err, &cniErr), "DEL of c fails: %v", err) {
		assert.Equal(t, uint(types.ErrTryAgainLater), cniErr.Code)
	}
	ipFile, _, record, _ := n.holds(c.ContainerID, c.IP)
	assert.True(t, ipFile && record, "c is still held and recorded")
	assert.Equal(t, "v1 ", n.markerPrefix(c.ContainerID))

	// f's ADD is repeated in a new sandbox at the same netns path: the old
	// rollback is finished (its IP and rules freed), then f is added anew.
	run(t, "ip", "netns", "del", "catena-s1-f")
	run(t, "ip", "netns", "add", "catena-s1-f")
	fNew := n.rt(f.ContainerID, f.NetNS, f.HostPort)
	res, err = n.cni.AddNetworkList(bg, n.list, fNew)
	require.NoError(t, err)
	n.delAtCleanup(fNew)
	r, err = current.NewResultFromResult(res)
	require.NoError(t, err)
	require.Len(t, r.IPs, 1)
	fIP := r.IPs[0].Address.String()
	assert.NotEqual(t, f.IP, fIP)
	oldIPFile, oldRules, _, _ := n.holds("no-such-container", f.IP)
	assert.False(t, oldIPFile || oldRules, "f's old IP and its rules are freed")
	require.NoError(t, n.cni.DelNetworkList(bg, n.list, fNew))
	n.assertReleased(f.ContainerID, fIP, f.NetNS)

	// The fault is gone: DEL of a, c and d as the runtime sends them. (No
	// retrier runs meanwhile: the one the DEL of c started has given up
	// until c and b are due again, seconds later; a retrier's teardown of c
	// would pass no CNI_NETNS, as the old record has no netns identity.)
	reapRetriers(t, n.cacheDir, 2*time.Minute)
	require.NoError(t, os.Remove(schema1.FaultFile))
	for _, att := range []schema1.Attachment{a, c, d} {
		require.NoError(t, n.cni.DelNetworkList(bg, n.list, n.rt(att.ContainerID, att.NetNS, att.HostPort)), att.ContainerID)
		n.assertReleased(att.ContainerID, att.IP, att.NetNS)
	}

	// b's and e's sandboxes are gone; the runtime's GC lists only the new
	// pod: both are torn down (b even though its retry backoff runs). (A
	// gcGracePeriod of 1ms: records made just before the test are old enough.)
	run(t, "ip", "netns", "del", "catena-s1-b")
	run(t, "ip", "netns", "del", "catena-s1-e")
	gcList := n.gcList(schema1.Network, "1ms", n.bridgeDelegate(), portmapDelegate, tuningDelegate)
	require.NoError(t, n.runtimeWithoutCache().GCNetworkList(bg, gcList, valid(newPod)))
	for _, att := range []schema1.Attachment{b, e} {
		n.assertReleased(att.ContainerID, att.IP, att.NetNS)
	}
	assert.Equal(t, []string{newIP}, n.sandboxAddrsOf(newPod.NetNS, schema1.IfName), "GC left the listed pod alone")

	require.NoError(t, n.cni.DelNetworkList(bg, n.list, newPod))
	n.assertReleased(newPod.ContainerID, newIP, newPod.NetNS)
	assert.Empty(t, n.ipamFiles(schema1.Network), "no IP is held")
	assert.Empty(t, n.hostVeths(), "no veth is left on the bridge")
	var rules []string
	for _, l := range strings.Split(run(t, "iptables-save"), "\n") {
		if strings.Contains(l, "10.253.71.") {
			rules = append(rules, l)
		}
	}
	assert.Empty(t, rules, "no rule mentions the subnet")
	assert.Empty(t, n.dirEntries("records/"+schema1.Network), "no record is left")
	reapRetriers(t, n.cacheDir, time.Minute) // a retrier's last pass may still be writing its stamp
	assert.Empty(t, n.dirEntries("pending/"+schema1.Network), "no pending marker is left")
}
