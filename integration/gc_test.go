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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gcList is a 1.1.0 catena conflist with the given gcGracePeriod.
func (w *world) gcList(name, grace string, delegates ...string) *libcni.NetworkConfigList {
	w.t.Helper()
	conf := fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"plugins":[{"type":"catena","cacheDir":%q,
	  "delegateTimeout":"20s","lockTimeout":"10s","gcGracePeriod":%q,"delegates":[%s]}]}`,
		name, w.cacheDir, grace, strings.Join(delegates, ","))
	list, err := libcni.ConfListFromBytes([]byte(conf))
	require.NoError(w.t, err)
	return list
}

// runtimeWithoutCache is a libcni whose own cache is empty: its GC reaches
// only Catena (libcni DELs the attachments of its cache itself), as after a
// node reboot that lost /var/lib/cni/results.
func (w *world) runtimeWithoutCache() *libcni.CNIConfig {
	return libcni.NewCNIConfigWithCacheDir([]string{cniPath}, w.t.TempDir(), nil)
}

func (w *world) container(name string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: w.id + "-" + name, NetNS: w.addNetns(w.id + "-" + name), IfName: "eth0"}
}

func valid(rts ...*libcni.RuntimeConf) *libcni.GCArgs {
	args := &libcni.GCArgs{ValidAttachments: []types.GCAttachment{}}
	for _, rt := range rts {
		args.ValidAttachments = append(args.ValidAttachments, types.GCAttachment{ContainerID: rt.ContainerID, IfName: rt.IfName})
	}
	return args
}

// TestGCRemovesOnlyDeadAttachments: GC with a valid list tears down the
// record that is not listed, and nothing of the listed one. (Catena
// forwards GC to bridge, but the reference bridge and host-local v1.9.1
// implement no GC of their own, so the IPs left are Catena's doing alone;
// TestCatenactlGCAndADDOnOneNetwork checks the lists a delegate's GC gets.)
func TestGCRemovesOnlyDeadAttachments(t *testing.T) {
	w := newWorld(t)
	const net = "itgc"
	list := w.gcList(net, "1ms", w.bridgeDelegate(), tuningDelegate)
	live, dead := w.container("live"), w.container("dead")
	for _, rt := range []*libcni.RuntimeConf{live, dead} {
		_, err := w.cni.AddNetworkList(bg, list, rt)
		require.NoError(t, err)
	}
	t.Cleanup(func() { _ = w.cni.DelNetworkList(bg, list, live) })
	require.Len(t, w.ipamFiles(net), 2)
	time.Sleep(10 * time.Millisecond) // past the 1ms grace period

	require.NoError(t, w.runtimeWithoutCache().GCNetworkList(bg, list, valid(live)))
	assert.Len(t, w.ipamFiles(net), 1, "only the dead attachment's IP is freed")
	assert.Len(t, w.hostVeths(), 1)
	recs := w.records(net)
	require.Len(t, recs, 1)
	assert.Contains(t, recs[0], live.ContainerID)
	assert.Equal(t, "complete", readRecord(t, recs[0])["phase"])
	require.NoError(t, w.cni.CheckNetworkList(bg, list, live), "the live attachment still checks out")

	require.NoError(t, w.cni.DelNetworkList(bg, list, live))
	assert.Empty(t, w.ipamFiles(net))
	assert.Empty(t, w.records(net))
}

// TestGCDuringADDReclaimsNothingOfIt is the whereabouts race: the runtime
// computes its valid list, an ADD starts, and GC runs while that ADD is in
// the middle of the chain. Nothing of the ADD may be reclaimed, whether the
// grace period or only the attachment's lock protects it.
func TestGCDuringADDReclaimsNothingOfIt(t *testing.T) {
	for _, grace := range []string{"2m", "1ms"} {
		t.Run("gcGracePeriod "+grace, func(t *testing.T) {
			w := newWorld(t)
			net := "itrace" + strings.TrimSuffix(grace, "s")
			gate := filepath.Join(t.TempDir(), "gate")
			calls := filepath.Join(t.TempDir(), "failer.log")
			list := w.gcList(net, grace, w.bridgeDelegate(),
				failer(fmt.Sprintf(`"waitFile":%q,"waitTimeout":"20s","logFile":%q`, gate, calls)))
			rt := w.container("slow")
			before := valid() // computed before the ADD starts: it is not listed

			done := make(chan error, 1)
			go func() {
				_, err := w.cni.AddNetworkList(bg, list, rt)
				done <- err
			}()
			t.Cleanup(func() { _ = w.cni.DelNetworkList(bg, list, rt) })
			require.Eventually(t, func() bool { return len(w.ipamFiles(net)) == 1 }, 20*time.Second, 10*time.Millisecond,
				"bridge/host-local has allocated; the ADD now waits in the failer")
			time.Sleep(10 * time.Millisecond)

			require.NoError(t, w.runtimeWithoutCache().GCNetworkList(bg, list, before))
			assert.Len(t, w.ipamFiles(net), 1, "GC reclaimed nothing of the in-flight ADD")
			log, err := os.ReadFile(calls)
			require.NoError(t, err)
			assert.Contains(t, string(log), "GC-VALID "+rt.ContainerID+"/eth0\n",
				"the delegates' own GC was told the in-flight attachment is valid")

			require.NoError(t, os.WriteFile(gate, nil, 0o600))
			require.NoError(t, <-done)
			assert.Len(t, w.ipamFiles(net), 1)
			assert.Len(t, w.sandboxAddrsOf(rt.NetNS, "eth0"), 1)
			recs := w.records(net)
			require.Len(t, recs, 1)
			assert.Equal(t, "complete", readRecord(t, recs[0])["phase"])
		})
	}
}

// TestFailedRollbackHealedWithoutTheRuntime: a rollback whose DEL fails
// leaves the IP held and recorded; containerd would never DEL again. GC (even
// listing the attachment) heals it, and so does the retrier a later ADD on
// the network starts.
func TestFailedRollbackHealedWithoutTheRuntime(t *testing.T) {
	for _, healer := range []string{"GC", "later ADD"} {
		t.Run(healer, func(t *testing.T) {
			w := newWorld(t)
			net := "itheal" + strings.ReplaceAll(healer, " ", "")
			fault := filepath.Join(t.TempDir(), "fault")
			require.NoError(t, os.WriteFile(fault, nil, 0o600))
			failing := w.gcList(net, "1ms", w.bridgeDelegate(),
				failer(fmt.Sprintf(`"failDel":true,"faultFile":%q`, fault)), failer(`"failAdd":true`))
			broken := w.container("broken")
			_, err := w.cni.AddNetworkList(bg, failing, broken)
			require.Error(t, err)
			require.Len(t, w.ipamFiles(net), 1, "the IP stays held")
			recs := w.records(net)
			require.Len(t, recs, 1)
			assert.Equal(t, "needs-teardown", readRecord(t, recs[0])["phase"])

			require.NoError(t, os.Remove(fault))
			time.Sleep(10 * time.Millisecond)
			switch healer {
			case "GC":
				require.NoError(t, w.runtimeWithoutCache().GCNetworkList(bg, failing, valid(broken)))
				assert.Empty(t, w.ipamFiles(net))
			case "later ADD":
				healthy := w.gcList(net, "1ms", w.bridgeDelegate())
				next := w.container("next")
				_, err := w.cni.AddNetworkList(bg, healthy, next)
				require.NoError(t, err)
				t.Cleanup(func() { _ = w.cni.DelNetworkList(bg, healthy, next) })
				// The retrier the ADD started releases it once due (1 s
				// after the failed rollback).
				assert.Eventually(t, func() bool { return len(w.ipamFiles(net)) == 1 }, 20*time.Second, 50*time.Millisecond,
					"only the new attachment's IP is held")
				reapRetriers(t, w.cacheDir, 20*time.Second)
				require.NoError(t, w.cni.DelNetworkList(bg, healthy, next))
				assert.Empty(t, w.ipamFiles(net))
			}
			assert.Empty(t, w.hostVeths())
			assert.Empty(t, w.records(net))
		})
	}
}
