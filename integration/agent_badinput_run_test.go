package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// notReadyWith waits until /readyz fails with a reason holding every want.
func (p *agentProc) notReadyWith(want ...string) string {
	p.t.Helper()
	var reason string
	p.waitFor("the agent not ready with "+fmt.Sprint(want), 30*time.Second, func() (bool, string) {
		ok, why := p.ready()
		reason = why
		if ok {
			return false, "ready"
		}
		for _, w := range want {
			if !strings.Contains(why, w) {
				return false, why
			}
		}
		return true, why
	})
	return reason
}

// roBind makes dir read-only for whoever opens it by that path (a
// read-only bind mount over itself, as a readOnly hostPath shows it to
// the agent) and returns a read-write view of it elsewhere, for the
// primary's own writer; undo restores dir.
func roBind(t *testing.T, dir string) (rw string, undo func()) {
	t.Helper()
	rw = t.TempDir()
	run(t, "mount", "--bind", dir, rw)
	t.Cleanup(func() { _ = exec.Command("umount", rw).Run() })
	run(t, "mount", "--bind", dir, dir)
	mounted := true
	undo = func() {
		if mounted {
			run(t, "umount", dir)
			mounted = false
		}
	}
	t.Cleanup(func() {
		if mounted {
			_ = exec.Command("umount", dir).Run()
		}
	})
	run(t, "mount", "-o", "remount,bind,ro", dir)
	return rw, undo
}

// TestAgentBadInputWhileRunning: the bad input under `run`, on
// containerd 2.4 with a sandbox running through Catena: a primary that is
// not valid JSON (written in place, as Calico's install-cni writes), a
// primary naming a plugin binary that is not in the CNI bin dir, and a
// conf dir the agent cannot write (a read-only bind mount, as a readOnly
// hostPath) while the primary changes. Each time /readyz fails with a
// message naming the file and what to do; the generated conflist is
// neither removed nor rewritten (same bytes and inode, read every 2 ms:
// never missing or invalid), no temp file is left, the running sandbox
// answers pings and a new sandbox starts through Catena; once the input
// is fixed the agent is ready again. (subnet.env missing mid-run:
// TestFlannelSubnetEnvBadInput.)
func TestAgentBadInputWhileRunning(t *testing.T) {
	v := containerd24()
	n := newAgentNode(t, &v)
	n.writePrimary(n.primary())
	n.waitLoaded(false)
	p := n.startRun("--reconcile-interval", "0s")
	n.waitLoaded(true)
	genPath := filepath.Join(n.confDir, generatedName)
	gen, err := os.ReadFile(genPath)
	require.NoError(t, err)
	genIno := inode(t, genPath)
	running, err := n.runPod("badrunning")
	require.NoError(t, err, n.d.logTail())
	_, ip, err := n.d.podStatus(running)
	require.NoError(t, err)
	require.NoError(t, ping(ip, 5*time.Second))

	stop := make(chan struct{})
	watched := make(chan *confWatch, 1)
	go func() { watched <- watchGenerated(genPath, isCatenaConfList, stop) }()

	primaryPath := filepath.Join(n.confDir, primaryName)
	// unchanged: the generated file as it was, the sandbox and a new one fine
	unchanged := func(what string) {
		t.Helper()
		time.Sleep(2500 * time.Millisecond) // longer than the agent's 2 s resync
		now, err := os.ReadFile(genPath)
		require.NoError(t, err, what)
		assert.Equal(t, string(gen), string(now), "%s: the generated conflist is untouched", what)
		assert.Equal(t, genIno, inode(t, genPath), "%s: and was not rewritten", what)
		tmp, err := filepath.Glob(filepath.Join(n.confDir, ".*.tmp"))
		require.NoError(t, err)
		assert.Empty(t, tmp, "%s: no temp file left", what)
		assert.NoError(t, ping(ip, 5*time.Second), "%s: the running sandbox still answers", what)
		id, err := n.runPod("badnew")
		require.NoError(t, err, "%s: a new sandbox starts: %s", what, n.d.logTail())
		assert.Len(t, opsFor(catenaOps(t, n.w.cacheDir), "ADD", id), 1, "%s: through Catena", what)
		require.NoError(t, n.d.stopPod(id))
		require.NoError(t, n.d.removePod(id))
	}
	var reasons []string

	// 1. not valid JSON, written in place
	whole := n.primary()
	require.NoError(t, os.WriteFile(primaryPath, []byte(whole[:len(whole)/2]), 0o644))
	reasons = append(reasons, p.notReadyWith(primaryName+": not valid JSON (half-written?)", "if its writer has finished, fix the file",
		"nothing written"))
	unchanged("invalid JSON")
	require.NoError(t, os.WriteFile(primaryPath, []byte(whole), 0o644))
	p.waitReady()

	// 2. a plugin binary missing: bandwidth is not in the node's bin dir
	withBandwidth := n.primary(`{"type":"bandwidth","capabilities":{"bandwidth":true}}`)
	n.writePrimary(withBandwidth)
	reasons = append(reasons, p.notReadyWith(primaryName+`: plugin 2, "bandwidth": plugin binary missing: no such file in `+n.binDir+" (--cni-path)",
		`Install "bandwidth" there`, "or set --cni-path to the runtime's CNI bin dirs", "nothing written, "+generatedName+" stays as it was"))
	unchanged("plugin binary missing")
	n.writePrimary(whole)
	p.waitReady()

	// 3. a conf dir the agent cannot write, while the primary changes
	rw, undo := roBind(t, n.confDir)
	writeAtomic(t, filepath.Join(rw, primaryName), []byte(n.primary(tuningSysctl(779))))
	reasons = append(reasons, p.notReadyWith("cannot write "+genPath+" (wrapping "+primaryName+")", "read-only file system",
		generatedName+" is left as it was, and does not follow "+primaryName+" until catena-agent can write the conf dir "+n.confDir,
		"mount it read-write (the DaemonSet's hostPath)"))
	unchanged("conf dir read-only")
	undo()
	took := p.waitFor("the agent writes the conf dir again", 30*time.Second, func() (bool, string) {
		ok, why := p.ready()
		return ok, why
	})
	close(stop)
	w := <-watched
	now, err := os.ReadFile(genPath)
	require.NoError(t, err)
	assert.Contains(t, string(now), `"779"`, "the generated conflist follows the primary once the dir is writable")
	assert.Zero(t, w.missing, "the generated conflist was never missing")
	assert.Zero(t, w.invalid, "nor invalid")

	require.NoError(t, n.d.stopPod(running))
	require.NoError(t, n.d.removePod(running))
	n.requireNothingHeld(running)
	assert.Empty(t, n.w.records(n.net))
	for _, r := range reasons {
		t.Logf("/readyz: %s", r)
	}
	t.Logf("bad input under run: 3 cases, each not ready with the reason above, generated conflist untouched (same bytes and inode), no temp file, "+
		"running sandbox answered, a new sandbox went through Catena; %d reads of the generated conflist: %d missing, %d invalid; "+
		"conf dir writable again: followed the primary in %s",
		w.reads, w.missing, w.invalid, took.Round(time.Millisecond))
}
