package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// gcSpyScript is a CNI plugin that appends the config of every GC it is
// sent to LOG, one line each, and answers VERSION; alone in a conflist
// that is not CRI-O's default network, it is sent nothing else.
const gcSpyScript = `#!/bin/sh
case "$CNI_COMMAND" in
VERSION) echo '{"cniVersion":"1.1.0","supportedVersions":["0.4.0","1.0.0","1.1.0"]}' ;;
GC) { cat; echo; } >>LOG ;;
esac
`

// gcSpy is a bin dir holding the spy plugin "gcspy", the conflist of a
// network of it, and the file it logs to.
func gcSpy(t *testing.T, w *world) (binDir, conflist, logFile string) {
	t.Helper()
	binDir = t.TempDir()
	logFile = filepath.Join(t.TempDir(), "gcspy.log")
	f, err := os.OpenFile(filepath.Join(binDir, "gcspy"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	require.NoError(t, err)
	_, err = f.WriteString(strings.ReplaceAll(gcSpyScript, "LOG", logFile))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	conflist = fmt.Sprintf(`{"cniVersion":"1.1.0","name":"gcspy-%s","plugins":[{"type":"gcspy"}]}`, w.id)
	return binDir, conflist, logFile
}

// gcOps counts the GC operations Catena journaled, and how many failed.
func gcOps(t *testing.T, cacheDir string) (all, failed int) {
	t.Helper()
	for _, op := range catenaOps(t, cacheDir) {
		if op.Verb == "GC" && op.Attachment == "" {
			all++
			if op.Outcome != "ok" {
				failed++
			}
		}
	}
	return all, failed
}

// waitGC waits until CRI-O's GC of its start has reached Catena (the
// n-th GC in its journal) and the spy (its n-th line).
func (c *crioDaemon) waitGC(n int, spyLog string) {
	c.t.Helper()
	c.eventually(fmt.Sprintf("CRI-O's GC number %d reaches Catena and the spy", n), time.Minute, func() error {
		all, _ := gcOps(c.t, c.w.cacheDir)
		raw, _ := os.ReadFile(spyLog)
		if spied := strings.Count(string(raw), "\n"); all < n || spied < n {
			return fmt.Errorf("Catena saw %d GCs, the spy %d", all, spied)
		}
		return nil
	})
}

// crioGCErrors are what CRI-O logs when its GC of a network fails.
var crioGCErrors = []string{"Error while GCing network", "Garbage collect stale network resources during plugin startup failed"}

// TestCRIOGCKeepsItsSandboxes: CRI-O sends GC once per start to every
// 1.1.0 network of its network_dir, the valid list made of its sandboxes
// on that network (ocicni), null when it has none.
//
//   - a fresh start, no sandbox: the list is null (a spy network shows it)
//     and Catena accepts it: CRI-O logs no GC error; Catena tears down a
//     record left by an earlier runtime instance (its netns is gone: IP
//     and record go), and keeps one whose netns holds a process, whatever
//     the list says (under an empty list a netns still pinned with no
//     process in it is no proof either: libchain's TestGCEmptyListProof);
//   - restarts of CRI-O (SIGTERM, then SIGKILL) with two sandboxes
//     running: the list names them; their IPs, veths and records are kept
//     and CRI-O reports the same IPs; a record of no sandbox is torn down.
func TestCRIOGCKeepsItsSandboxes(t *testing.T) {
	w := newWorld(t)
	net := "criogc-" + w.id
	flog := filepath.Join(t.TempDir(), "failer.log")
	list := w.gcList(net, "1ms", w.bridgeDelegate(), failer(fmt.Sprintf(`"logFile":%q`, flog)))
	spyDir, spyList, spyLog := gcSpy(t, w)

	// What an earlier runtime instance left: an attachment whose netns is
	// gone, and one whose netns holds a process.
	stale, live := w.container("stale"), w.container("live")
	w.podProcess(filepath.Base(live.NetNS))
	for _, rt := range []*libcni.RuntimeConf{stale, live} {
		_, err := w.cni.AddNetworkList(bg, list, rt)
		require.NoError(t, err)
		t.Cleanup(func() { _ = w.cni.DelNetworkList(bg, list, rt) })
	}
	require.Len(t, w.ipamFiles(net), 2)
	require.Len(t, w.hostVeths(), 2)
	// stale's sandbox is gone: its netns, and its veth with it
	run(t, "ip", "netns", "del", filepath.Base(stale.NetNS))
	time.Sleep(10 * time.Millisecond) // past the 1ms grace period

	c := startCRIOWith(t, w, string(list.Bytes), crioSetup{files: map[string]string{"90-gcspy.conflist": spyList}, binDirs: []string{spyDir}})
	c.waitNetworkReady()
	c.waitGC(1, spyLog)
	raw, err := os.ReadFile(spyLog)
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"cni.dev/valid-attachments":null`, "a fresh CRI-O sends null for a network without sandboxes")
	for _, e := range crioGCErrors {
		assert.NotContains(t, c.log(), e, "CRI-O's GC succeeded")
	}
	_, failed := gcOps(t, w.cacheDir)
	assert.Zero(t, failed, "Catena's GC succeeded")
	recs := w.records(net)
	require.Len(t, recs, 1, "the stale record is collected, the live one kept")
	assert.Contains(t, recs[0], live.ContainerID)
	assert.Len(t, w.ipamFiles(net), 1, "the stale IP is freed")
	assert.Len(t, w.hostVeths(), 1, "the stale veth is gone (with its netns)")
	assert.Len(t, w.sandboxAddrsOf(live.NetNS, "eth0"), 1, "the live attachment is untouched")

	// Two sandboxes; a record of no sandbox, which the next GC collects.
	pods := map[string]string{}
	for _, name := range []string{"gc-a", "gc-b"} {
		id := c.mustRunPod(name, 0)
		_, ip, _, err := c.podStatus(id)
		require.NoError(t, err)
		pods[id] = ip
	}
	for i, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		unlisted := w.container(fmt.Sprintf("unlisted%d", i))
		_, err := w.cni.AddNetworkList(bg, list, unlisted)
		require.NoError(t, err)
		t.Cleanup(func() { _ = w.cni.DelNetworkList(bg, list, unlisted) })
		require.Len(t, w.records(net), 4)
		time.Sleep(10 * time.Millisecond)

		c.restart(sig)
		c.waitNetworkReady()
		c.waitGC(2+i, spyLog)
		for _, e := range crioGCErrors {
			assert.NotContains(t, c.log(), e, "after %v: CRI-O's GC succeeded", sig)
		}
		_, failed := gcOps(t, w.cacheDir)
		assert.Zero(t, failed, "after %v: Catena's GC succeeded", sig)
		var ips []string
		for id, ip := range pods {
			state, got, _, err := c.podStatus(id)
			require.NoError(t, err)
			assert.Equal(t, cri.PodSandboxState_SANDBOX_READY, state, "after %v", sig)
			assert.Equal(t, ip, got, "after %v: CRI-O restored the sandbox's IP", sig)
			ips = append(ips, ip)
			assertRecordComplete(t, w, net, id)
		}
		assert.ElementsMatch(t, ips, withoutIP(w.ipamFiles(net), w.sandboxAddrsOf(live.NetNS, "eth0")),
			"after %v: the sandboxes' IPs are held, the unlisted one's freed", sig)
		assert.Len(t, w.hostVeths(), 3, "after %v: the sandboxes' and the live attachment's veths", sig)
		assert.Len(t, w.records(net), 3, "after %v: the unlisted one's record is collected", sig)
		// the last GC's list (restore's CHECKs may come before or after it)
		var lastValid string
		for _, l := range failerLog(t, flog) {
			if strings.HasPrefix(l, "GC-VALID ") {
				lastValid = l
			}
		}
		assert.Equal(t, "GC-VALID "+strings.Join(sortedAttachments(append(keys(pods), live.ContainerID)), " "), lastValid,
			"after %v: the delegate's GC is told the sandboxes and the live attachment are valid", sig)
	}

	for id := range pods {
		require.NoError(t, c.stopPod(id), c.logTail())
		require.NoError(t, c.removePod(id), c.logTail())
	}
	assert.Len(t, w.ipamFiles(net), 1, "only the live attachment's IP is left")
	assert.Len(t, w.records(net), 1)
	assert.Len(t, w.hostVeths(), 1)
}

// assertRecordComplete: Catena holds a complete record of sandbox id.
func assertRecordComplete(t *testing.T, w *world, network, id string) {
	t.Helper()
	for _, r := range w.records(network) {
		if strings.Contains(r, id) {
			assert.Equal(t, "complete", readRecord(t, r)["phase"], "the record of %s", id)
			return
		}
	}
	t.Errorf("no record of %s in %v", id, w.records(network))
}

// withoutIP is the IPs of files but those of addrs (CIDRs).
func withoutIP(files, addrs []string) []string {
	var out []string
	for _, f := range files {
		keep := true
		for _, a := range addrs {
			if strings.HasPrefix(a, f+"/") {
				keep = false
			}
		}
		if keep {
			out = append(out, f)
		}
	}
	return out
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// sortedAttachments is "<id>/eth0" of each container ID, sorted, as the
// failer logs a GC's valid list.
func sortedAttachments(ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		out = append(out, id+"/eth0")
	}
	sort.Strings(out)
	return out
}
