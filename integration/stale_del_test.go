package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain/events"
)

// reuseNode is the field's failure on real plugins: the chain
// [bridge + host-local with a range of one address, firewall (which frees
// its CNI-FORWARD rules by address), failer whose DEL fails while its
// fault file exists], run by libcni with its own result cache, as a
// runtime runs it.
type reuseNode struct {
	w       *world
	c       *ctl
	cni     *libcni.CNIConfig
	libcni  string // libcni's cache dir
	fault   string
	net, ip string
}

func newReuseNode(t *testing.T, net string) *reuseNode {
	w := newWorld(t)
	n := &reuseNode{w: w, net: net, libcni: filepath.Join(t.TempDir(), "libcni"), fault: filepath.Join(t.TempDir(), "fault")}
	n.ip = strings.TrimSuffix(w.subnet, "0/24") + "10"
	ipam := fmt.Sprintf(`{"type":"bridge","bridge":%q,"isGateway":true,
	  "ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":%q,"rangeStart":%q,"rangeEnd":%q}]]}}`,
		w.bridge, w.ipamDir, w.subnet, n.ip, n.ip)
	n.c = w.newCtl(net, ipam, `{"type":"firewall","backend":"iptables"}`,
		failer(fmt.Sprintf(`"failDel":true,"faultFile":%q`, n.fault)))
	n.cni = libcni.NewCNIConfigWithCacheDir([]string{cniPath}, n.libcni, nil)
	return n
}

// pod is a sandbox of its own: a netns, and the runtime's view of it.
func (n *reuseNode) pod(name string) *libcni.RuntimeConf {
	id := n.w.id + "-" + name
	rt := n.w.rt(id, nil)
	rt.NetNS = n.w.addNetns(id)
	return rt
}

// fwRules counts the CNI-FORWARD rules naming ip.
func fwRules(t *testing.T, ip string) int {
	t.Helper()
	out := run(t, "iptables", "-S", "CNI-FORWARD")
	return strings.Count(out, ip+"/32")
}

// holder is the container ID host-local's reservation of ip names.
func (n *reuseNode) holder(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(n.w.ipamDir, n.net, n.ip))
	if os.IsNotExist(err) {
		return ""
	}
	require.NoError(t, err)
	return strings.TrimSpace(strings.SplitN(string(data), "\n", 2)[0])
}

// failedDel is A's runtime DEL failing at failer: libcni keeps A's
// cached result. The retrier the failed DEL started is stopped unless
// keepRetrier, so that the teardown under test is the only one.
func (n *reuseNode) failedDel(t *testing.T, a *libcni.RuntimeConf, keepRetrier bool) {
	t.Helper()
	require.NoError(t, os.WriteFile(n.fault, nil, 0o600))
	require.Error(t, n.cni.DelNetworkList(bg, n.c.list, a))
	if !keepRetrier {
		reapRetriers(t, n.w.cacheDir, 0)
	}
	require.NoError(t, os.Remove(n.fault))
	require.Len(t, n.cachedResults(t), 1, "libcni keeps A's result after its DEL failed")
}

func (n *reuseNode) cachedResults(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(n.libcni, "results", n.net+"-*"))
	require.NoError(t, err)
	return m
}

// addB adds pod B, which host-local gives A's old address.
func (n *reuseNode) addB(t *testing.T) *libcni.RuntimeConf {
	t.Helper()
	b := n.pod("b")
	res, err := n.cni.AddNetworkList(bg, n.c.list, b)
	require.NoError(t, err)
	r, err := current.NewResultFromResult(res)
	require.NoError(t, err)
	require.Len(t, r.IPs, 1)
	require.Equal(t, n.ip, r.IPs[0].Address.IP.String(), "B has A's old address")
	require.Equal(t, 2, fwRules(t, n.ip), "firewall's two rules for B")
	return b
}

// requireBIntact: B's address, rules, veth and record are all there.
func (n *reuseNode) requireBIntact(t *testing.T, b *libcni.RuntimeConf) {
	t.Helper()
	assert.Equal(t, b.ContainerID, n.holder(t), "host-local still reserves the address for B")
	assert.Equal(t, 2, fwRules(t, n.ip), "B's firewall rules")
	assert.Len(t, n.w.hostVeths(), 1, "B's veth")
	assert.Equal(t, []string{n.ip + "/24"}, n.w.sandboxAddrsOf(b.NetNS, "eth0"), "B's address in its netns")
	recs := n.w.records(n.net)
	require.Len(t, recs, 1)
	rec := readRecord(t, recs[0])
	assert.Equal(t, "complete", rec["phase"])
	assert.Equal(t, b.ContainerID, rec["key"].(map[string]any)["containerID"])
}

// lastRelease is the noRecordRelease of the journal's last DEL of A.
func (n *reuseNode) lastRelease(t *testing.T, a *libcni.RuntimeConf) *events.OpRelease {
	t.Helper()
	ops, _, err := events.Read(afero.NewOsFs(), n.w.cacheDir, time.Time{})
	require.NoError(t, err)
	for i := len(ops) - 1; i >= 0; i-- {
		if ops[i].Verb == "DEL" && strings.Contains(ops[i].Attachment, a.ContainerID) {
			return ops[i].NoRecordRelease
		}
	}
	return nil
}

// TestStaleDelNeverFreesTheNewOwner: A's runtime DEL fails, so libcni
// keeps A's result; a teardown other than the runtime's finishes A (the
// detached retrier, catenactl repair, catenactl gc of a gone netns); B is
// given A's address; then the runtime's retried DEL of A with A's cached
// result, or libcni's GC of the stale cache entry, must free nothing of
// B's. Without the tombstone, firewall's DEL with A's result deleted B's
// two CNI-FORWARD rules (2 → 0) and the DEL answered success.
func TestStaleDelNeverFreesTheNewOwner(t *testing.T) {
	finish := []struct {
		name    string
		retrier bool // the detached retrier the failed DEL starts does it
		run     func(t *testing.T, n *reuseNode, a *libcni.RuntimeConf)
	}{
		{name: "the detached retrier", retrier: true, run: func(t *testing.T, n *reuseNode, a *libcni.RuntimeConf) {
			require.Eventually(t, func() bool { return len(n.w.records(n.net)) == 0 }, 30*time.Second, 50*time.Millisecond,
				"the retrier finishes A's teardown")
			reapRetriers(t, n.w.cacheDir, 10*time.Second)
		}},
		{name: "catenactl repair", run: func(t *testing.T, n *reuseNode, a *libcni.RuntimeConf) {
			out, stderr, code := n.c.run("repair")
			require.Equal(t, 0, code, "%s%s", out, stderr)
		}},
		{name: "catenactl gc of a gone netns", run: func(t *testing.T, n *reuseNode, a *libcni.RuntimeConf) {
			run(t, "ip", "netns", "del", a.ContainerID)
			out, stderr, code := n.c.run("gc", "--stale-netns")
			require.Equal(t, 0, code, "%s%s", out, stderr)
		}},
	}
	stale := []struct {
		name string
		del  func(t *testing.T, n *reuseNode, a, b *libcni.RuntimeConf)
	}{
		{"the runtime's retried DEL", func(t *testing.T, n *reuseNode, a, _ *libcni.RuntimeConf) {
			require.NoError(t, n.cni.DelNetworkList(bg, n.c.list, a))
		}},
		{"libcni's GC of the stale entry", func(t *testing.T, n *reuseNode, _, b *libcni.RuntimeConf) {
			require.NoError(t, n.cni.GCNetworkList(bg, n.c.list, &libcni.GCArgs{
				ValidAttachments: []types.GCAttachment{{ContainerID: b.ContainerID, IfName: "eth0"}}}))
		}},
	}
	for _, f := range finish {
		for _, s := range stale {
			t.Run(f.name+", then "+s.name, func(t *testing.T) {
				n := newReuseNode(t, "itstale")
				a := n.pod("a")
				_, err := n.cni.AddNetworkList(bg, n.c.list, a)
				require.NoError(t, err)
				n.failedDel(t, a, f.retrier)
				f.run(t, n, a)
				require.Empty(t, n.w.records(n.net), "A is torn down")
				require.Empty(t, n.holder(t), "A's address is free")
				b := n.addB(t)

				s.del(t, n, a, b)

				n.requireBIntact(t, b)
				cached := n.cachedResults(t)
				require.Len(t, cached, 1, "libcni forgot A's result once the DEL succeeded")
				assert.Contains(t, cached[0], b.ContainerID)
				rel := n.lastRelease(t, a)
				require.NotNil(t, rel, "the DEL is journaled")
				assert.Equal(t, events.ReleaseTombstone, rel.Outcome, "%+v", rel)
				assert.NoFileExists(t, filepath.Join(n.w.cacheDir, "tombstones", n.net, a.ContainerID+":eth0.json"),
					"the runtime's DEL cleared the tombstone")
			})
		}
	}
}

// TestRepeatedDelKeepsWhatALiveRecordHolds: A's runtime DEL completed,
// but the runtime died before it forgot A's result (libcni's cache file
// is still there); B is given A's address; the repeated DEL with A's
// result invokes nothing, because B's record names the address. Without
// the check, B's CNI-FORWARD rules went 2 → 0.
func TestRepeatedDelKeepsWhatALiveRecordHolds(t *testing.T) {
	n := newReuseNode(t, "itrepeat")
	a := n.pod("a")
	_, err := n.cni.AddNetworkList(bg, n.c.list, a)
	require.NoError(t, err)
	cached := n.cachedResults(t)
	require.Len(t, cached, 1)
	kept, err := os.ReadFile(cached[0])
	require.NoError(t, err)
	require.NoError(t, n.cni.DelNetworkList(bg, n.c.list, a))
	require.Empty(t, n.cachedResults(t))
	require.NoError(t, os.WriteFile(cached[0], kept, 0o600)) // the runtime died before forgetting it
	b := n.addB(t)

	require.NoError(t, n.cni.DelNetworkList(bg, n.c.list, a))

	n.requireBIntact(t, b)
	rel := n.lastRelease(t, a)
	require.NotNil(t, rel)
	assert.Equal(t, events.ReleaseKept, rel.Outcome)
	assert.Contains(t, rel.Reason, n.ip+" is held by "+n.net+"/"+b.ContainerID+"/eth0")
}

// TestLostRecordReleaseFreesIPMasq: the record of a complete ADD through
// [bridge with ipMasq + host-local] is lost (the file deleted) while the
// pod's netns still holds eth0 with its address; the runtime's DEL with
// the cached result passes CNI_NETNS, proven by that address, so bridge
// removes the veth and its ipMasq rules as the plain chain's DEL would.
// Without the proof the DEL ran without CNI_NETNS and both leaked.
func TestLostRecordReleaseFreesIPMasq(t *testing.T) {
	w := newWorld(t)
	const net = "itlostmasq"
	masq := fmt.Sprintf(`{"type":"bridge","bridge":%q,"isGateway":true,"ipMasq":true,
	  "ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":%q}]]}}`, w.bridge, w.ipamDir, w.subnet)
	list := w.catenaList(net, "1.1.0", masq)
	rt := w.rt(w.id+"-m", nil)
	_, err := w.cni.AddNetworkList(bg, list, rt)
	require.NoError(t, err)
	require.Positive(t, iptablesMentions(t, rt.ContainerID), "bridge's ipMasq rules name the container")
	recs := w.records(net)
	require.Len(t, recs, 1)
	require.NoError(t, os.Remove(recs[0])) // the record is lost

	require.NoError(t, w.cni.DelNetworkList(bg, list, rt))

	assert.Zero(t, iptablesMentions(t, rt.ContainerID), "the ipMasq rules are gone")
	assert.Empty(t, w.hostVeths(), "the veth is gone")
	assert.Empty(t, w.ipamFiles(net), "the address is free")
	ops, _, err := events.Read(afero.NewOsFs(), w.cacheDir, time.Time{})
	require.NoError(t, err)
	last := ops[len(ops)-1]
	require.Equal(t, "DEL", last.Verb)
	require.NotNil(t, last.NoRecordRelease)
	assert.Equal(t, events.ReleaseReleased, last.NoRecordRelease.Outcome)
	assert.True(t, last.NoRecordRelease.WithNetNS)
}
