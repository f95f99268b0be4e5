package integration

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// crioAgentNode is an agentNode whose runtime is a private CRI-O: its
// network_dir is the node's conf dir, holding the primary
// [bridge + host-local] as its only file at start (so its default
// network), and its plugin_dirs are the node's bin dir (where the agent
// installs catena) and then the test's CNI path. CRI-O keeps libcni's
// cache where libcni puts it by default, /var/lib/cni/results, the agent's
// default --results-dir.
type crioAgentNode struct {
	*agentNode
	c *crioDaemon
}

// newCRIOAgentNode starts CRI-O on the node's dirs and waits until its
// network (the primary) is ready.
func newCRIOAgentNode(t *testing.T) *crioAgentNode {
	t.Helper()
	requireCRIO(t)
	n := &crioAgentNode{agentNode: newAgentNode(t, nil)}
	n.c = startCRIOWith(t, n.w, "", crioSetup{files: map[string]string{primaryName: n.primary()}, binDirs: []string{n.binDir}})
	n.confDir = n.c.confDir
	n.c.waitNetworkReady()
	return n
}

// primary is the primary's conflist, [bridge + host-local]: CRI-O maps a
// sandbox's hostPorts itself, so no portmap.
func (n *crioAgentNode) primary() string {
	return fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"plugins":[%s]}`, n.net, n.w.bridgeDelegate())
}

// loaded is what ocicni logs when it (re)loads the network_dir with the
// agent's generated conflist first: it takes Catena's file for the
// primary's network name and ignores the primary's file of the same name.
func (n *crioAgentNode) loaded() []string {
	return []string{
		fmt.Sprintf("Found CNI network %s (type=catena) at %s", n.net, filepath.Join(n.confDir, generatedName)),
		fmt.Sprintf("Ignored CNI network %s (type=bridge) at %s because already exists", n.net, filepath.Join(n.confDir, primaryName)),
	}
}

// logSince is CRI-O's log after offset bytes.
func (n *crioAgentNode) logSince(offset int) string {
	log := n.c.log()
	if offset > len(log) {
		return ""
	}
	return log[offset:]
}

// waitCatena waits until CRI-O, since offset in its log, has reloaded its
// network_dir taking the generated conflist for the primary's network.
func (n *crioAgentNode) waitCatena(offset int) {
	n.t.Helper()
	n.c.eventually("CRI-O takes the generated conflist for network "+n.net, time.Minute, func() error {
		since := n.logSince(offset)
		for _, line := range n.loaded() {
			if !strings.Contains(since, line) {
				return fmt.Errorf("not logged yet: %s", line)
			}
		}
		return nil
	})
}

// waitPrimary waits until CRI-O's last reload of its network_dir since
// offset in its log found the primary's file alone for the network.
func (n *crioAgentNode) waitPrimary(offset int) {
	n.t.Helper()
	found := fmt.Sprintf("Found CNI network %s (type=bridge) at %s", n.net, filepath.Join(n.confDir, primaryName))
	n.c.eventually("CRI-O takes the primary's conflist alone for network "+n.net, time.Minute, func() error {
		// each reload logs the networks it found, then this line
		reloads := strings.Split(n.logSince(offset), "Updated default CNI network name to "+n.net)
		if len(reloads) < 2 {
			return errors.New("no reload yet")
		}
		last := reloads[len(reloads)-2]
		if strings.Contains(last, "(type=catena)") || !strings.Contains(last, found) {
			return fmt.Errorf("the last reload found: %s", last)
		}
		return nil
	})
}

// crioReconcileFlags are run's reconciler flags against the node's CRI-O.
func (n *crioAgentNode) crioReconcileFlags(interval, grace time.Duration, extra ...string) []string {
	return append([]string{"--runtime-endpoint", "unix://" + n.c.sock, "--reconcile-interval", interval.String(),
		"--grace", grace.String(), "--runtime-timeout", "5s"}, extra...)
}

// requireNothingHeld: CRI-O knows no sandbox; no IP, veth or record.
func (n *crioAgentNode) requireNothingHeld() {
	n.t.Helper()
	assert.Empty(n.t, n.c.pods())
	assert.Empty(n.t, n.w.ipamFiles(n.net), "no IP held")
	assert.Empty(n.t, n.w.hostVeths(), "no veth")
	assert.Empty(n.t, n.w.records(n.net), "no record")
}

// stopRemove stops and removes the sandboxes, requiring success.
func (n *crioAgentNode) stopRemove(ids ...string) {
	n.t.Helper()
	for _, id := range ids {
		require.NoError(n.t, n.c.stopPod(id), n.c.logTail())
		require.NoError(n.t, n.c.removePod(id), n.c.logTail())
	}
}

// sandboxPID is the sandbox's pause process.
func (c *crioDaemon) sandboxPID(id string) int {
	c.t.Helper()
	return criSandboxPID(c.t, c.rt, id)
}

// crash kills crio by PID and nothing else: conmon and the sandboxes'
// pause processes live on, as when systemd's crio.service is killed.
func (c *crioDaemon) crash() {
	c.t.Helper()
	require.NoError(c.t, c.cmd.Process.Kill())
	<-c.exited
}

// wipeStorage deletes CRI-O's storage root and runroot (on a node
// /var/lib/containers/storage and /run/containers/storage), where it keeps
// every sandbox it knows: every mount under them is detached first. The
// pinned network namespaces (namespaces_dir) and runc's state stay, as
// they do on a node whose container storage is wiped; the pause processes
// live on in them.
func (c *crioDaemon) wipeStorage() {
	c.t.Helper()
	dirs := []string{filepath.Join(c.dir, "root"), filepath.Join(c.dir, "run", "storage")}
	for _, d := range dirs {
		unmountUnder(c.t, d)
	}
	for _, d := range dirs {
		require.NoError(c.t, os.RemoveAll(d), "wiping %s", d)
		_, err := os.Stat(d)
		require.ErrorIs(c.t, err, fs.ErrNotExist)
	}
}

// startAgain starts crio again on the same config and dirs and waits
// until its CRI API answers.
func (c *crioDaemon) startAgain() {
	c.t.Helper()
	c.start()
	c.waitReady()
}

// podState is the sandbox's state as CRI-O lists it.
func (c *crioDaemon) podState(id string) cri.PodSandboxState {
	c.t.Helper()
	st, _, _, err := c.podStatus(id)
	require.NoError(c.t, err)
	return st
}

// killPID kills pid by PID if it is still a pause process, and waits until
// it is gone.
func killPID(t *testing.T, pid int) {
	t.Helper()
	killPause(pid)
	require.Eventually(t, func() bool {
		return syscall.Kill(pid, 0) != nil || !isPause(pid)
	}, 10*time.Second, 20*time.Millisecond, "pause %d exits", pid)
}

// isPause reports whether pid is a pause process now.
func isPause(pid int) bool {
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return err == nil && strings.TrimSpace(string(comm)) == "pause"
}
