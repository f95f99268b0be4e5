package integration

import (
	"github.com/catena-cni/catena/internal/proctest"

	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
)

// Helpers of the crash tests.

// failpointCNIPath builds catena with `-tags failpoint` into a private CNI
// dir beside the plugins of cniPath, and returns that dir.
func failpointCNIPath(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	_, here, _, _ := runtime.Caller(0)
	cmd := exec.Command("go", "build", "-tags", "failpoint", "-trimpath", "-o", filepath.Join(dir, "catena"), "./plugins/catena")
	cmd.Dir = filepath.Dir(filepath.Dir(here))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "building catena with -tags failpoint: %s", out)
	for _, p := range []string{"failer", "bridge", "host-local", "portmap", "tuning", "loopback"} {
		require.NoError(t, os.Symlink(filepath.Join(cniPath, p), filepath.Join(dir, p)))
	}
	return dir
}

// envExec runs plugins as libcni does, with extra environment variables.
type envExec struct {
	*invoke.RawExec
	version.PluginDecoder
	env []string
}

func (e *envExec) ExecPlugin(ctx context.Context, path string, stdin []byte, environ []string) ([]byte, error) {
	return e.RawExec.ExecPlugin(ctx, path, stdin, append(environ, e.env...))
}

// runtimeWithEnv is a runtime (libcni) over path whose plugins get env.
func (w *world) runtimeWithEnv(path string, env ...string) *libcni.CNIConfig {
	return libcni.NewCNIConfigWithCacheDir([]string{path}, w.t.TempDir(),
		&envExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}, env: env})
}

// failpointCounts reads a CATENA_FAILPOINT_TRACE file: how many times the
// run passed each point, and the points in order of first passage.
func failpointCounts(t *testing.T, path string) (map[string]int, []string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	counts := map[string]int{}
	var order []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := sc.Text()
		if counts[p] == 0 {
			order = append(order, p)
		}
		counts[p]++
	}
	require.NoError(t, sc.Err())
	return counts, order
}

// pluginProcs lists the live processes (not zombies) run for containerID:
// catena and its delegates, found by CNI_CONTAINERID in their environment.
func pluginProcs(t *testing.T, containerID string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	want := []byte("CNI_CONTAINERID=" + containerID + "\x00")
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, want) || proctest.Gone(t, pid) {
			continue // gone meanwhile, or not ours
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		out = append(out, fmt.Sprintf("%d (%s)", pid, strings.TrimSpace(string(comm))))
	}
	return out
}

// pluginPIDs are the PIDs of the live processes named comm run for
// containerID.
func pluginPIDs(t *testing.T, containerID, comm string) []int {
	t.Helper()
	var pids []int
	for _, p := range pluginProcs(t, containerID) {
		var pid int
		var name string
		_, err := fmt.Sscanf(p, "%d (%s", &pid, &name)
		require.NoError(t, err)
		if strings.TrimSuffix(name, ")") == comm {
			pids = append(pids, pid)
		}
	}
	return pids
}

// pluginProc returns the PID of the one live process named comm run for
// containerID.
func pluginProc(t *testing.T, containerID, comm string) int {
	t.Helper()
	pids := pluginPIDs(t, containerID, comm)
	require.Len(t, pids, 1, "one %s for %s", comm, containerID)
	require.Greater(t, pids[0], 1)
	return pids[0]
}

// waitPluginProc waits up to within until a process named comm runs for
// containerID: a delegate that is running, not only about to be.
func waitPluginProc(t *testing.T, containerID, comm string, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return len(pluginPIDs(t, containerID, comm)) > 0 },
		within, 20*time.Millisecond, "a %s running for %s", comm, containerID)
}

// requireNoPluginProcs waits (up to 5s: a parent-death signal is delivered
// at once, but the kernel reaps asynchronously) until no process run for
// containerID is left.
func requireNoPluginProcs(t *testing.T, containerID, msg string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := pluginProcs(t, containerID)
		if len(left) == 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s: processes outlive catena: %v", msg, left)
		time.Sleep(20 * time.Millisecond)
	}
}

// requireNoHostVeths waits (up to 5s: the kernel destroys a deleted netns,
// and the veth in it, asynchronously) until no veth is on the bridge.
func requireNoHostVeths(t *testing.T, w *world, msg string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := bridgePorts(t, w.bridge)
		if len(left) == 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s: host veths left: %v", msg, left)
		time.Sleep(20 * time.Millisecond)
	}
}

// bridgePorts lists the interfaces enslaved to bridge, retrying a link dump
// that links created or deleted meanwhile (by other tests) interrupted.
func bridgePorts(t *testing.T, bridge string) []string {
	t.Helper()
	for attempt := 0; ; attempt++ {
		br, err := netlink.LinkByName(bridge)
		if err != nil {
			return nil // no bridge, no veth on it
		}
		links, err := netlink.LinkList()
		if errors.Is(err, netlink.ErrDumpInterrupted) && attempt < 20 {
			continue
		}
		require.NoError(t, err)
		var out []string
		for _, l := range links {
			if l.Attrs().MasterIndex == br.Attrs().Index {
				out = append(out, l.Attrs().Name)
			}
		}
		return out
	}
}

// dirEntries lists a directory (nil if missing), hidden files included.
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
