package installtest

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// repoRoot is the repo's checkout: this package is tools/installtest.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, "scripts", "versions.env"))
	return root
}

// pins returns scripts/versions.env's NAME=value lines.
func pins(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot(t), "scripts", "versions.env"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if name, value, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			out[name] = value
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// result is what a script run left.
type result struct {
	err     error
	stderr  string
	elapsed time.Duration
}

// runScript runs bash scripts/<name> from the repo's root with the
// environment plus env (env wins), in a process group of its own that is
// killed at limit and, at the latest, when the test ends: no go or build
// process it started outlives the test.
func runScript(t *testing.T, name string, limit time.Duration, env ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, "bash", filepath.Join("scripts", name))
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stdout = &stderr
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	res := result{err: err, stderr: stderr.String(), elapsed: time.Since(start)}
	// The group's stragglers, if the script left any behind.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	require.NoError(t, ctx.Err(), "%s still running after %s; its output:\n%s", name, limit, res.stderr)
	return res
}
