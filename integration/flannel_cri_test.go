package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain/events"
)

// Flannel's own CNI plugin (scripts/install-flannel.sh) under containerd
// 2.4's CRI: flannel reads subnet.env, renders a bridge + host-local config,
// keeps it in its cache dir and delegates to it; at DEL it reads the file
// back and removes it. Nothing of flannel's may be left by the seed failure
// or by a catena killed between flannel and the next delegate.

// TestFlannelSeedFailureCRI is containerd issue 12130 with flannel first in
// the chain: the plugin after it fails ADD and DEL. Five RunPodSandbox
// attempts each: as a plain conflist, containerd's DEL stops at the failing
// plugin, so flannel's DEL never runs: one IP and one file in flannel's
// cache dir leak per attempt. Through Catena the rollback DELs flannel,
// which releases both: 0 and 0.
func TestFlannelSeedFailureCRI(t *testing.T) {
	const attempts = 5
	w := newWorld(t)
	fault := filepath.Join(t.TempDir(), "fault")
	touch(t, fault)
	bad := failer(fmt.Sprintf(`"failAdd":true,"failDel":true,"faultFile":%q`, fault))
	cat := flannelIn(t, w, "flseedcat-"+w.id)
	plain := flannelIn(t, w, "flseedplain-"+w.id)
	d := startContainerd(t, containerd24(), string(w.catenaList(cat.net, "0.3.1", cat.plugin(), bad, flannelPortmap).Bytes))
	// lift the fault before containerd's cleanup removes what is left
	// (cleanups run last-in first-out)
	t.Cleanup(func() { _ = os.Remove(fault) })

	for _, tc := range []struct {
		name string
		f    *flannelNode
		want flannelHeld
	}{
		{"catena", cat, flannelHeld{}},
		{"plain conflist", plain, flannelHeld{IPs: attempts, Files: attempts}},
	} {
		if tc.f == plain {
			d.setConflist(plain.net, plain.conflist(bad))
		}
		failed := 0
		for range attempts {
			if _, err := d.runPod(d.podConfig("flseed", 0)); err != nil {
				failed++
			}
		}
		held := tc.f.heldSettled(w.cacheDir, tc.want, 10*time.Second)
		t.Logf("flannel, %s: %d RunPodSandbox attempts, %d failed; left: %s; %d sandboxes", tc.name, attempts, failed, held, len(d.pods()))
		assert.Equal(t, attempts, failed, tc.name)
		assert.Equal(t, tc.want, held, tc.name)
		assert.Empty(t, d.pods(), "containerd 2.4 forgets failed sandboxes")
		if tc.f == cat {
			for _, op := range opsFor(catenaOps(t, w.cacheDir), "ADD", "") {
				assert.True(t, op.Rollback, "each ADD was rolled back: %+v", op)
				assert.Contains(t, callNames(op), "flannel DEL", "the rollback DELs flannel")
			}
		}
	}
}

// TestFlannelCrashBetweenDelegatesCRI: catena is killed (SIGKILL) after
// flannel's ADD (an IP allocated, flannel's file written) while the next
// delegate runs. containerd's RunPodSandbox fails, and its DEL reaches a
// catena that finds the record of flannel's ADD and tears it down: no IP,
// veth, flannel file, record or process is left. The pod's retry then
// starts through Catena, and its removal leaves nothing.
func TestFlannelCrashBetweenDelegatesCRI(t *testing.T) {
	w := newWorld(t)
	dir := t.TempDir()
	f := flannelIn(t, w, "flcrash-"+w.id)
	proceed, logFile := filepath.Join(dir, "proceed"), filepath.Join(dir, "failer.log")
	hold := failer(fmt.Sprintf(`"waitFile":%q,"waitTimeout":"50s","logFile":%q`, proceed, logFile))
	d := startContainerd(t, containerd24(), string(w.catenaList(f.net, "0.3.1", f.plugin(), hold, flannelPortmap).Bytes))

	done := make(chan error, 1)
	go func() {
		_, err := d.runPod(d.podConfig("flcrash", 0))
		done <- err
	}()
	var cid string
	waitFor(t, "the delegate after flannel runs", time.Minute, 20*time.Millisecond, func() error {
		cid = firstAdd(t, logFile)
		if cid == "" {
			return fmt.Errorf("no ADD in %s yet", logFile)
		}
		return nil
	})
	assert.Equal(t, []string{cid}, f.cacheFiles(), "flannel's ADD wrote its file")
	assert.Equal(t, []string{cid}, f.ipHolders(), "and bridge's host-local allocated the IP")
	killed := pluginProc(t, cid, "catena")
	require.NoError(t, syscall.Kill(killed, syscall.SIGKILL))
	var runErr error
	select {
	case runErr = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("RunPodSandbox did not return after catena was killed\n%s", d.logTail())
	}
	require.ErrorContains(t, runErr, "killed", "RunPodSandbox fails with catena killed")
	requireNoPluginProcs(t, cid, "after the kill and containerd's DEL")
	held := f.held(w.cacheDir)
	assert.Equal(t, flannelHeld{}, held, "containerd's DEL through Catena released flannel's ADD")
	assert.Empty(t, libcniEntries(t, cid))
	dels := opsFor(catenaOps(t, w.cacheDir), "DEL", cid)
	require.NotEmpty(t, dels, "containerd DELed the failed sandbox")
	assert.Equal(t, "ok", dels[0].Outcome, "%+v", dels[0])
	assert.Contains(t, callNames(dels[0]), "flannel DEL")

	touch(t, proceed)
	id, err := d.runPod(d.podConfig("flcrash", 0))
	require.NoError(t, err, "the retry starts through Catena\n%s", d.logTail())
	assert.Equal(t, flannelHeld{IPs: 1, Veths: 1, Files: 1, Records: 1}, f.held(w.cacheDir))
	require.NoError(t, d.stopPod(id))
	require.NoError(t, d.removePod(id))
	after := f.held(w.cacheDir)
	assert.Equal(t, flannelHeld{}, after)
	msg := runErr.Error()
	t.Logf("catena (pid %d) killed between flannel and the next delegate: RunPodSandbox failed (...%s); after containerd's DEL (calls %v): %s; the retry ran and was removed: %s",
		killed, msg[max(0, len(msg)-30):], callNames(dels[0]), held, after)
}

// firstAdd is the container ID of the first ADD in failer's log, or "".
func firstAdd(t *testing.T, logFile string) string {
	t.Helper()
	raw, err := os.ReadFile(logFile)
	if os.IsNotExist(err) {
		return ""
	}
	require.NoError(t, err)
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "ADD" {
			return f[1]
		}
	}
	return ""
}

// callNames are an op's delegate calls as "type VERB".
func callNames(op events.Op) []string {
	var out []string
	for _, c := range op.Calls {
		out = append(out, c.Type+" "+c.Verb)
	}
	return out
}
