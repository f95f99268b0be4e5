package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/internal/clitest"
)

// startAgent runs `catena-agent run` on n in process until the returned
// stop is called (as kubelet's SIGTERM); stop returns its exit code.
func startAgent(t *testing.T, n node, extra ...string) (addr string, stop func() int, stderr *clitest.SyncBuffer) {
	t.Helper()
	addr = freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	stderr = &clitest.SyncBuffer{}
	go func() {
		args := append(append([]string{"run", "--listen-addr", addr, "--reconcile-interval", "0s"}, n.installArgs()...), extra...)
		done <- runContext(ctx, args, env{stdout: io.Discard, stderr: stderr, fs: afero.NewOsFs()})
	}()
	var once sync.Once
	code := 0
	stop = func() int {
		once.Do(func() {
			cancel()
			code = <-done
		})
		return code
	}
	t.Cleanup(func() { stop() })
	return addr, stop, stderr
}

func httpGet(addr, path string) (int, string) {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestUninstallWaitsForAgent: uninstall run while an agent still runs (the
// DaemonSet's pods are deleted in the background) must not report success
// while the agent can write the file again. The agent gets its SIGTERM 1 s
// after uninstall starts; uninstall exits 0 only once the agent is gone,
// and the file stays removed.
func TestUninstallWaitsForAgent(t *testing.T) {
	n := newNode(t, map[string]string{"10-bridge.conflist": primaryCL})
	own := filepath.Join(n.conf, "00-catena.conflist")
	addr, stop, agentErr := startAgent(t, n)
	require.Eventually(t, func() bool { c, _ := httpGet(addr, "/readyz"); return c == 200 }, 5*time.Second, 20*time.Millisecond)

	type result struct {
		code        int
		out, stderr string
		at          time.Time
	}
	res := make(chan result, 1)
	start := time.Now()
	go func() {
		code, out, stderr := runAgent(t, "uninstall", "--cni-conf-dir", n.conf, "--cache-dir", n.cache)
		res <- result{code, out, stderr, time.Now()}
	}()
	time.Sleep(time.Second)
	stopped := time.Now()
	assert.Equal(t, 0, stop(), agentErr.String())
	r := <-res
	require.Equal(t, 0, r.code, r.stderr)
	t.Logf("uninstall exited after %s (agent stopped after %s): %q", r.at.Sub(start).Round(time.Millisecond), stopped.Sub(start).Round(time.Millisecond), r.out+r.stderr)
	assert.False(t, r.at.Before(stopped), "uninstall reported success while the agent still ran")
	time.Sleep(500 * time.Millisecond)
	assert.NoFileExists(t, own, "the agent wrote the file again after uninstall's success")
	assert.Equal(t, map[string]string{"10-bridge.conflist": primaryCL}, readDir(t, n.conf), "nothing of catena's left in the conf dir")
}

// TestUninstallFailsWhileAgentRuns: an agent that does not stop within
// --agent-timeout makes uninstall exit 1 saying what to do, leaving the
// file in place (the agent would write it again anyway).
func TestUninstallFailsWhileAgentRuns(t *testing.T) {
	n := newNode(t, map[string]string{"10-bridge.conflist": primaryCL})
	addr, _, _ := startAgent(t, n)
	require.Eventually(t, func() bool { c, _ := httpGet(addr, "/readyz"); return c == 200 }, 5*time.Second, 20*time.Millisecond)
	code, out, stderr := runAgent(t, "uninstall", "--cni-conf-dir", n.conf, "--cache-dir", n.cache, "--agent-timeout", "500ms")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, stderr, "catena-agent run")
	assert.Contains(t, stderr, "delete its DaemonSet")
	assert.FileExists(t, filepath.Join(n.conf, "00-catena.conflist"))
}

// TestAgentHonoursUninstallWait: while `uninstall --wait` runs (the
// uninstall DaemonSet), an agent that starts (a pod restarted) writes
// nothing and is not ready, naming the holder; once uninstall ends, the
// agent installs.
func TestAgentHonoursUninstallWait(t *testing.T) {
	n := newNode(t, map[string]string{"10-bridge.conflist": primaryCL})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var out, errb clitest.SyncBuffer
	go func() {
		done <- runContext(ctx, []string{"uninstall", "--cni-conf-dir", n.conf, "--cache-dir", n.cache, "--wait"}, env{stdout: &out, stderr: &errb, fs: afero.NewOsFs()})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	require.Eventually(t, func() bool { return bytes.Contains([]byte(out.String()), []byte("still have a record")) }, 5*time.Second, 20*time.Millisecond)
	addr, _, _ := startAgent(t, n)
	var body string
	require.Eventually(t, func() bool {
		var c int
		c, body = httpGet(addr, "/readyz")
		return c == 503 && !bytes.Contains([]byte(body), []byte("no pass yet"))
	}, 5*time.Second, 20*time.Millisecond)
	assert.Contains(t, body, "catena-agent uninstall")
	time.Sleep(500 * time.Millisecond)
	assert.NoFileExists(t, filepath.Join(n.conf, "00-catena.conflist"))
	cancel()
	assert.Equal(t, 0, <-done, errb.String())
	done <- 0
	require.Eventually(t, func() bool { c, _ := httpGet(addr, "/readyz"); return c == 200 }, 5*time.Second, 20*time.Millisecond)
	_, err := os.Stat(filepath.Join(n.conf, "00-catena.conflist"))
	assert.NoError(t, err)
}
