package main

import (
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

// buildPlugin builds the test plugin under plugins/testing/<name> into dir.
func buildPlugin(t *testing.T, dir, name string) {
	t.Helper()
	out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), "../testing/"+name).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// invocation is one run of the catena binary.
type invocation struct {
	stdout, stderr []byte
	err            error         // from Wait: nil or an *exec.ExitError
	maxRSS         int64         // peak RSS of catena and the delegates it waited for, bytes
	took           time.Duration // wall time
}

// runCatena runs bin with env (CNI_* variables; PATH is the test's) and
// stdin, killing it after a minute: a test must not hang on a catena that
// does.
func runCatena(t *testing.T, bin string, env map[string]string, stdin string) invocation {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		if v != "" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "catena hung")
	inv := invocation{stdout: stdout.Bytes(), stderr: stderr.Bytes(), err: err, took: time.Since(start)}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		inv.maxRSS = ru.Maxrss << 10 // Linux reports KiB
	}
	return inv
}
