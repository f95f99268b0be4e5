package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/catena-cni/catena/cache"
)

// nsInode is the inode of the nsfs file at path (the namespace's proc
// inode number, which the kernel reuses once a namespace is freed).
func nsInode(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	require.NoError(t, unix.Stat(path, &st))
	return st.Ino
}

// reusedPath is the scenario of a runtime that names netns files itself:
// the old attachment at netns X fails its DEL (its record is pending), X is
// deleted and made again (a new namespace at the same path), and a new
// attachment is added into the new X.
type reusedPath struct {
	net      string
	list     *libcni.NetworkConfigList
	path     string
	old, neu *libcni.RuntimeConf
	oldIP    string // the old attachment's IP in host-local's store
	newAddr  current.IPConfig
}

func newReusedPath(t *testing.T, w *world, net string) *reusedPath {
	t.Helper()
	fault := filepath.Join(t.TempDir(), "fault")
	require.NoError(t, os.WriteFile(fault, nil, 0o600))
	name := w.id + "-x"
	p := &reusedPath{net: net, path: w.addNetns(name),
		list: w.catenaList(net, "1.1.0", w.bridgeDelegate(), failer(fmt.Sprintf(`"failDel":true,"faultFile":%q`, fault)))}
	p.old = &libcni.RuntimeConf{ContainerID: w.id + "-old", NetNS: p.path, IfName: "eth0"}
	p.neu = &libcni.RuntimeConf{ContainerID: w.id + "-new", NetNS: p.path, IfName: "eth0"}
	t.Cleanup(func() { _ = w.cni.DelNetworkList(bg, p.list, p.neu) })
	t.Cleanup(func() { _ = w.cni.DelNetworkList(bg, p.list, p.old) })

	_, err := w.cni.AddNetworkList(bg, p.list, p.old)
	require.NoError(t, err)
	oldIPs := w.ipamFiles(net)
	require.Len(t, oldIPs, 1)
	p.oldIP = oldIPs[0]
	require.Error(t, w.cni.DelNetworkList(bg, p.list, p.old), "failer's DEL fails")
	recs := w.records(net)
	require.Len(t, recs, 1)
	require.Equal(t, "needs-teardown", readRecord(t, recs[0])["phase"])

	before := nsInode(t, p.path)
	run(t, "ip", "netns", "del", name)
	run(t, "ip", "netns", "add", name)
	t.Logf("netns inode before %d, after re-creation %d (the kernel may reuse it)", before, nsInode(t, p.path))
	require.NoError(t, os.Remove(fault))

	res, err := w.cni.AddNetworkList(bg, p.list, p.neu)
	require.NoError(t, err)
	r, err := current.NewResultFromResult(res)
	require.NoError(t, err)
	require.Len(t, r.IPs, 1)
	p.newAddr = *r.IPs[0]
	return p
}

// spared checks that the old record is gone and its IP freed, and that the
// new attachment keeps its eth0, its IP and its record.
func (p *reusedPath) spared(t *testing.T, w *world) {
	t.Helper()
	assert.Equal(t, []string{p.newAddr.Address.String()}, w.sandboxAddrsOf(p.path, "eth0"),
		"the new container's eth0 and IP survive the old attachment's teardown")
	require.NoError(t, w.cni.CheckNetworkList(bg, p.list, p.neu))
	ips := w.ipamFiles(p.net)
	assert.Equal(t, []string{p.newAddr.Address.IP.String()}, ips, "the old container's IP is freed, the new one's held")
	assert.NotContains(t, ips, p.oldIP)
	recs := w.records(p.net)
	require.Len(t, recs, 1, "the old record is torn down")
	assert.Contains(t, recs[0], p.neu.ContainerID)
	assert.Len(t, w.hostVeths(), 1, "only the new container's veth is on the bridge")
}

// TestRetriedTeardownSparesANewNamespaceAtTheSamePath: the background retry
// of the old teardown, started after the ADD into the new X, must not run
// bridge DEL inside it (that deleted the new container's eth0); it runs
// with an empty CNI_NETNS, which still frees the old container's IP.
func TestRetriedTeardownSparesANewNamespaceAtTheSamePath(t *testing.T) {
	w := newWorld(t)
	p := newReusedPath(t, w, "itnsid")
	// The retrier the DEL or the ADD started tears the old record down
	// once it is due (1 s after the failed DEL).
	require.Eventually(t, func() bool { return len(w.records(p.net)) == 1 }, 20*time.Second, 50*time.Millisecond,
		"the retrier tears the old record down")
	reapRetriers(t, w.cacheDir, 20*time.Second)
	p.spared(t, w)
}

// TestRuntimeDelSparesANewNamespaceAtTheSamePath: the runtime's own DEL of
// the old attachment, naming X, must not run bridge DEL inside the new X
// either: its delegates get an empty CNI_NETNS, and the journal names the
// attachment. The test holds the cache dir's retrier lock, so that no
// background retry tears the old record down first.
func TestRuntimeDelSparesANewNamespaceAtTheSamePath(t *testing.T) {
	w := newWorld(t)
	retrier, err := cache.TryRetrierLock(w.cacheDir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = retrier.Close() })
	p := newReusedPath(t, w, "itnsdel")
	require.Len(t, w.records(p.net), 2, "the old record is still pending: no retrier ran")

	require.NoError(t, w.cni.DelNetworkList(bg, p.list, p.old), "the runtime's DEL of the old attachment")
	p.spared(t, w)
	dels := opsFor(catenaOps(t, w.cacheDir), "DEL", p.old.ContainerID)
	require.NotEmpty(t, dels)
	last := dels[len(dels)-1]
	assert.Equal(t, "ok", last.Outcome)
	assert.Equal(t, []string{p.net + "/" + p.old.ContainerID + "/eth0"}, last.NetNSReplaced, "the journal names the attachment")
}
