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

// TestRetriedTeardownSparesANewNamespaceAtTheSamePath is issue 12 item 1: a
// record that needs teardown names netns X; X is deleted and a new netns is
// created at the same path, as runtimes that name netns deterministically
// do. The background retry of the old teardown, started after the next ADD
// into the new X, must not run bridge DEL inside it (that deleted the new
// container's eth0); it runs with an empty CNI_NETNS, which still frees the
// old container's IP.
func TestRetriedTeardownSparesANewNamespaceAtTheSamePath(t *testing.T) {
	w := newWorld(t)
	const net = "itnsid"
	fault := filepath.Join(t.TempDir(), "fault")
	require.NoError(t, os.WriteFile(fault, nil, 0o600))
	list := w.catenaList(net, "1.1.0", w.bridgeDelegate(), failer(fmt.Sprintf(`"failDel":true,"faultFile":%q`, fault)))
	name := w.id + "-x"
	path := w.addNetns(name)
	old := &libcni.RuntimeConf{ContainerID: w.id + "-old", NetNS: path, IfName: "eth0"}
	neu := &libcni.RuntimeConf{ContainerID: w.id + "-new", NetNS: path, IfName: "eth0"}
	t.Cleanup(func() { _ = w.cni.DelNetworkList(bg, list, neu) })
	t.Cleanup(func() { _ = w.cni.DelNetworkList(bg, list, old) })

	_, err := w.cni.AddNetworkList(bg, list, old)
	require.NoError(t, err)
	oldIPs := w.ipamFiles(net)
	require.Len(t, oldIPs, 1)
	require.Error(t, w.cni.DelNetworkList(bg, list, old), "failer's DEL fails")
	recs := w.records(net)
	require.Len(t, recs, 1)
	require.Equal(t, "needs-teardown", readRecord(t, recs[0])["phase"])

	before := nsInode(t, path)
	run(t, "ip", "netns", "del", name)
	run(t, "ip", "netns", "add", name)
	t.Logf("netns inode before %d, after re-creation %d (the kernel may reuse it)", before, nsInode(t, path))
	require.NoError(t, os.Remove(fault))

	res, err := w.cni.AddNetworkList(bg, list, neu)
	require.NoError(t, err)
	// The retrier the DEL or the ADD started tears the old record down
	// once it is due (1 s after the failed DEL).
	require.Eventually(t, func() bool { return len(w.records(net)) == 1 }, 20*time.Second, 50*time.Millisecond,
		"the retrier tears the old record down")
	reapRetriers(t, w.cacheDir, 20*time.Second)
	r, err := current.NewResultFromResult(res)
	require.NoError(t, err)
	require.Len(t, r.IPs, 1)

	assert.Equal(t, []string{r.IPs[0].Address.String()}, w.sandboxAddrsOf(path, "eth0"),
		"the new container's eth0 and IP survive the retry of the old teardown")
	require.NoError(t, w.cni.CheckNetworkList(bg, list, neu))
	ips := w.ipamFiles(net)
	assert.Equal(t, []string{r.IPs[0].Address.IP.String()}, ips, "the old container's IP is freed, the new one's held")
	assert.NotContains(t, ips, oldIPs[0])
	recs = w.records(net)
	require.Len(t, recs, 1, "the old record is torn down")
	assert.Contains(t, recs[0], neu.ContainerID)
	assert.Len(t, w.hostVeths(), 1, "only the new container's veth is on the bridge")
	assert.Equal(t, []string{r.IPs[0].Address.String()}, w.sandboxAddrsOf(path, "eth0"))
}

// TestRuntimeDelSparesANewNamespaceAtTheSamePath: the runtime's own DEL of
// an attachment whose teardown is pending, naming its netns path after the
// path was reused for a new pod's namespace, must not run bridge DEL inside
// the new namespace (it deleted the new pod's eth0): its delegates get an
// empty CNI_NETNS, which still frees the old container's IP, and the
// journal names the attachment. The test holds the cache dir's retrier
// lock, so that no background retry tears the old record down first.
func TestRuntimeDelSparesANewNamespaceAtTheSamePath(t *testing.T) {
	w := newWorld(t)
	const net = "itnsdel"
	retrier, err := cache.TryRetrierLock(w.cacheDir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = retrier.Close() })
	fault := filepath.Join(t.TempDir(), "fault")
	require.NoError(t, os.WriteFile(fault, nil, 0o600))
	list := w.catenaList(net, "1.1.0", w.bridgeDelegate(), failer(fmt.Sprintf(`"failDel":true,"faultFile":%q`, fault)))
	name := w.id + "-x"
	path := w.addNetns(name)
	old := &libcni.RuntimeConf{ContainerID: w.id + "-old", NetNS: path, IfName: "eth0"}
	neu := &libcni.RuntimeConf{ContainerID: w.id + "-new", NetNS: path, IfName: "eth0"}
	t.Cleanup(func() { _ = w.cni.DelNetworkList(bg, list, neu) })
	t.Cleanup(func() { _ = w.cni.DelNetworkList(bg, list, old) })

	_, err = w.cni.AddNetworkList(bg, list, old)
	require.NoError(t, err)
	oldIPs := w.ipamFiles(net)
	require.Len(t, oldIPs, 1)
	require.Error(t, w.cni.DelNetworkList(bg, list, old), "failer's DEL fails")
	run(t, "ip", "netns", "del", name)
	run(t, "ip", "netns", "add", name)
	require.NoError(t, os.Remove(fault))
	res, err := w.cni.AddNetworkList(bg, list, neu)
	require.NoError(t, err)
	r, err := current.NewResultFromResult(res)
	require.NoError(t, err)
	require.Len(t, r.IPs, 1)
	require.Len(t, w.records(net), 2, "the old record is still pending: no retrier ran")

	require.NoError(t, w.cni.DelNetworkList(bg, list, old), "the runtime's DEL of the old attachment")
	assert.Equal(t, []string{r.IPs[0].Address.String()}, w.sandboxAddrsOf(path, "eth0"),
		"the new pod's eth0 and IP survive the old attachment's DEL")
	require.NoError(t, w.cni.CheckNetworkList(bg, list, neu))
	ips := w.ipamFiles(net)
	assert.Equal(t, []string{r.IPs[0].Address.IP.String()}, ips, "the old container's IP is freed, the new one's held")
	recs := w.records(net)
	require.Len(t, recs, 1, "the old record is torn down")
	assert.Contains(t, recs[0], neu.ContainerID)
	dels := opsFor(catenaOps(t, w.cacheDir), "DEL", old.ContainerID)
	require.NotEmpty(t, dels)
	last := dels[len(dels)-1]
	assert.Equal(t, "ok", last.Outcome)
	assert.Equal(t, []string{net + "/" + old.ContainerID + "/eth0"}, last.NetNSReplaced, "the journal names the attachment")
}
