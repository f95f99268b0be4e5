package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestRunFollowsReplacedConfDir: `mv net.d net.d.old; mkdir net.d` with an
// hour-long resync: /readyz turns 503 at once (the generated file is not in
// the dir the runtime reads), and a primary written into the new dir is
// wrapped within 2 s (the watch is re-armed on the new dir).
func TestRunFollowsReplacedConfDir(t *testing.T) {
	n := newNode(t, map[string]string{"10-bridge.conflist": primaryCL})
	addr, _, agentErr := startAgent(t, n, "--resync", "1h")
	require.Eventually(t, func() bool { c, _ := httpGet(addr, "/readyz"); return c == 200 }, 5*time.Second, 20*time.Millisecond)

	require.NoError(t, os.Rename(n.conf, n.conf+".old"))
	require.NoError(t, os.Mkdir(n.conf, 0o755))
	var body string
	ok := assert.Eventually(t, func() bool {
		var c int
		c, body = httpGet(addr, "/readyz")
		return c == 503
	}, 2*time.Second, 20*time.Millisecond, "/readyz after the conf dir was replaced by an empty one")
	if ok {
		t.Logf("/readyz: %s", strings.TrimSpace(body))
	}
	require.NoError(t, os.WriteFile(filepath.Join(n.conf, "10-bridge.conflist"), []byte(primaryCL), 0o644))
	start := time.Now()
	assert.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(n.conf, "00-catena.conflist"))
		return err == nil
	}, 2*time.Second, 20*time.Millisecond, "the primary in the new conf dir is wrapped")
	t.Logf("wrapped in the new dir after %s", time.Since(start).Round(time.Millisecond))
	assert.Eventually(t, func() bool { c, _ := httpGet(addr, "/readyz"); return c == 200 }, 2*time.Second, 20*time.Millisecond, agentErr.String())
	assert.NotContains(t, agentErr.String(), "taken away", "a replaced conf dir is no writer taking the file: no backoff")
}

// TestRunExitsOnStaleMount: the conf dir is a bind mount of a host dir (a
// hostPath volume); the host renames its dir away and makes a new one. The
// mount still shows the old inode, so every write goes where the runtime
// no longer looks: run fails readiness and exits 1 naming the cause, so
// kubelet restarts the container with a fresh mount.
func TestRunExitsOnStaleMount(t *testing.T) {
	for _, how := range []string{"renamed", "deleted"} {
		t.Run(how, func(t *testing.T) {
			n := newNode(t, map[string]string{"10-bridge.conflist": primaryCL})
			host := filepath.Join(t.TempDir(), "host-net.d")
			require.NoError(t, os.Rename(n.conf, host))
			require.NoError(t, os.Mkdir(n.conf, 0o755))
			if err := unix.Mount(host, n.conf, "", unix.MS_BIND, ""); err != nil {
				t.Skipf("bind mount: %v", err)
			}
			t.Cleanup(func() { _ = unix.Unmount(n.conf, unix.MNT_DETACH) })
			addr, stop, agentErr := startAgent(t, n, "--resync", "300ms")
			require.Eventually(t, func() bool { c, _ := httpGet(addr, "/readyz"); return c == 200 }, 5*time.Second, 20*time.Millisecond)

			if how == "renamed" {
				require.NoError(t, os.Rename(host, host+".old"))
				require.NoError(t, os.Mkdir(host, 0o755))
			} else {
				require.NoError(t, os.RemoveAll(host))
			}
			assert.Eventually(t, func() bool { c, _ := httpGet(addr, "/readyz"); return c != 200 }, 3*time.Second, 20*time.Millisecond, "/readyz with a stale mount")
			if assert.Eventually(t, func() bool { return strings.Contains(agentErr.String(), "stale conf dir mount") }, 3*time.Second, 20*time.Millisecond, "run stops by itself") {
				assert.Equal(t, 1, stop(), "run exits non-zero so kubelet remounts")
			}
			assert.Contains(t, agentErr.String(), how, "the cause is named")
		})
	}
}
