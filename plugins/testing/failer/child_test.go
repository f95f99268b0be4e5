package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStartChildSharesProcessGroup: the child lives on after startChild
// returns, in the caller's process group, and both PIDs are in the file.
func TestStartChildSharesProcessGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "sub", "pids")
	require.NoError(t, startChild(pidFile, time.Minute))
	data, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	lines := strings.Fields(string(data))
	require.Len(t, lines, 2)
	assert.Equal(t, strconv.Itoa(os.Getpid()), lines[0])
	child, err := strconv.Atoi(lines[1])
	require.NoError(t, err)
	require.Greater(t, child, 1, "a real PID (never signal 0, -1 or init)")
	t.Cleanup(func() {
		_ = syscall.Kill(child, syscall.SIGKILL)
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(child, &ws, 0, nil)
	})
	pgid, err := syscall.Getpgid(child)
	require.NoError(t, err, "the child is running")
	assert.Equal(t, syscall.Getpgrp(), pgid)
	comm, err := os.ReadFile("/proc/" + lines[1] + "/comm")
	require.NoError(t, err)
	assert.Equal(t, "sleep\n", string(comm))
}
