package integration

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Helpers shared by the lock, isolation and soak tests.

// timedList is a 1.1.0 catena conflist with the given lockTimeout and
// delegateTimeout, logging to w.logFile().
func (w *world) timedList(name, lockTimeout, delegateTimeout string, delegates ...string) *libcni.NetworkConfigList {
	w.t.Helper()
	conf := fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"plugins":[{"type":"catena","cacheDir":%q,
	  "delegateTimeout":%q,"lockTimeout":%q,"logFile":%q,"capabilities":{"portMappings":true},"delegates":[%s]}]}`,
		name, w.cacheDir, delegateTimeout, lockTimeout, w.logFile(), strings.Join(delegates, ","))
	list, err := libcni.ConfListFromBytes([]byte(conf))
	require.NoError(w.t, err)
	return list
}

// logFile is catena's log, beside its cache dir: warnings of expected
// failures go there rather than into the test's output.
func (w *world) logFile() string {
	return filepath.Join(filepath.Dir(w.cacheDir), "catena.log")
}

// delAtCleanup DELs the attachment when the test ends, so that a test that
// failed half-way leaves no portmap rule behind (a DEL of what is already
// gone succeeds and invokes nothing).
func (w *world) delAtCleanup(list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) {
	w.t.Cleanup(func() {
		assert.NoError(w.t, w.cni.DelNetworkList(bg, list, rt), "cleanup DEL of %s", rt.ContainerID)
	})
}

// lockPath is where catena's flock of an attachment lives.
func (w *world) lockPath(network, container string) string {
	return filepath.Join(w.cacheDir, "locks", network, container+":eth0.lock")
}

// lockFiles lists every lock file left in the world's cache dir.
func (w *world) lockFiles() []string {
	w.t.Helper()
	m, err := filepath.Glob(filepath.Join(w.cacheDir, "locks", "*", "*.lock"))
	require.NoError(w.t, err)
	return m
}

// ipOwners maps each IP host-local holds on network to the container ID it
// was allocated to.
func (w *world) ipOwners(network string) map[string]string {
	w.t.Helper()
	out := map[string]string{}
	for _, ip := range w.ipamFiles(network) {
		data, err := os.ReadFile(filepath.Join(w.ipamDir, network, ip))
		require.NoError(w.t, err)
		out[ip] = strings.SplitN(string(data), "\r\n", 2)[0]
	}
	return out
}

// portmapRulesFor reports whether iptables-save output holds portmap rules
// of exactly this container (its comment names it in quotes, so one ID that
// prefixes another does not count).
func portmapRulesFor(save, container string) bool {
	return strings.Contains(save, `id: \"`+container+`\"`)
}

// cniCode returns the CNI error code of err (0 if it carries none).
func cniCode(err error) uint {
	var te *types.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return 0
}

// waitForFile polls for path, failing the test after timeout.
func waitForFile(t *testing.T, path string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s did not appear within %s", path, timeout)
		time.Sleep(20 * time.Millisecond)
	}
}

// failerPIDs reads a failer pidFile: the failer's PID and its child's. The
// child is killed at cleanup whatever the test proves, so a failing test
// leaves no sleep behind.
func failerPIDs(t *testing.T, pidFile string) (failer, child int) {
	t.Helper()
	data, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	f := strings.Fields(string(data))
	require.Len(t, f, 2, "pidFile %s: %q", pidFile, data)
	pids := make([]int, 2)
	for i := range f {
		pids[i], err = strconv.Atoi(f[i])
		require.NoError(t, err)
		require.Greater(t, pids[i], 1, "a real PID: never signal 0, -1 or init")
	}
	for _, pid := range pids {
		t.Cleanup(func() { killIfSleep(pid) })
	}
	return pids[0], pids[1]
}

// killIfSleep SIGKILLs pid only if it is still a failer or sleep, so that a
// recycled PID is never hit.
func killIfSleep(pid int) {
	if pid <= 1 {
		return
	}
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return
	}
	if c := strings.TrimSpace(string(comm)); c == "sleep" || c == "failer" {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// p99 is the nearest-rank 99th percentile.
func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := (99*len(s) + 99) / 100
	return s[rank-1]
}

func medianOf(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
