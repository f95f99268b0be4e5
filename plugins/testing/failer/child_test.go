package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
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

// daemonPID reads the PID a DEL with daemonFile wrote, and kills and reaps
// that process at cleanup.
func daemonPID(t *testing.T, pidFile string) int {
	t.Helper()
	data, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err)
	require.Greater(t, pid, 1, "a real PID (never signal 0, -1 or init)")
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, 0, nil)
	})
	return pid
}

// TestDelLeavesADaemon: a DEL with daemonFile that succeeds leaves a sleep
// running in a session of its own, holding an fd the caller let failer
// inherit; a DEL that fails leaves nothing.
func TestDelLeavesADaemon(t *testing.T) {
	dir := t.TempDir()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close(); _ = w.Close() })
	// As an fd failer inherited would be: not close-on-exec.
	_, err = unix.FcntlInt(w.Fd(), unix.F_SETFD, 0)
	require.NoError(t, err)
	inherited, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", w.Fd()))
	require.NoError(t, err)

	failing := filepath.Join(dir, "failing")
	err = cmdDel(cmdArgs(conf(t, "1.0.0", map[string]any{"failDel": true, "daemonFile": failing})))
	cniErr(t, err, 100)
	assert.NoFileExists(t, failing, "a failed DEL leaves no process")

	pidFile := filepath.Join(dir, "sub", "daemon")
	require.NoError(t, cmdDel(cmdArgs(conf(t, "1.0.0", map[string]any{"daemonFile": pidFile}))))
	pid := daemonPID(t, pidFile)
	sid, err := unix.Getsid(pid)
	require.NoError(t, err, "the daemon is running")
	assert.Equal(t, pid, sid, "it leads a session of its own")
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	require.NoError(t, err)
	assert.Equal(t, "sleep\n", string(comm))
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	require.NoError(t, err)
	var targets []string
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil {
			targets = append(targets, target)
		}
	}
	assert.Contains(t, targets, inherited, "it holds what failer inherited")
}
