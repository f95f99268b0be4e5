package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// startChild starts a sleep lasting d in failer's own process group, without
// waiting for it, and atomically writes failer's PID and the child's to
// pidFile, one per line. Tests use it to prove that killing a delegate's
// process group reaches what the delegate started. The child's stdio is
// /dev/null, so it never holds the caller's pipes open.
func startChild(pidFile string, d time.Duration) error {
	cmd := exec.Command("sleep", fmt.Sprintf("%.3f", d.Seconds()))
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("failer: start child: %w", err)
	}
	pid := cmd.Process.Pid // before Release, which resets it to -1
	// Never waited for: once failer exits, init reaps it.
	_ = cmd.Process.Release()
	data := fmt.Appendf(nil, "%d\n%d\n", os.Getpid(), pid)
	if err := writeState(filepath.Dir(pidFile), pidFile, data); err != nil {
		return fmt.Errorf("failer: pidFile: %w", err)
	}
	return nil
}

// daemonLife is how long the process startDaemon leaves behind lives.
const daemonLife = time.Minute

// startDaemon leaves a process behind as a delegate that starts a daemon
// does: a sleep of daemonLife in a session of its own (out of the caller's
// process group, which catena kills on a timeout), never waited for, with
// /dev/null for stdio and every fd failer inherited without close-on-exec.
// Its PID is written to pidFile, atomically.
func startDaemon(pidFile string) error {
	cmd := exec.Command("sleep", fmt.Sprintf("%.0f", daemonLife.Seconds()))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("failer: start daemon: %w", err)
	}
	pid := cmd.Process.Pid // before Release, which resets it to -1
	_ = cmd.Process.Release()
	if err := writeState(filepath.Dir(pidFile), pidFile, fmt.Appendf(nil, "%d\n", pid)); err != nil {
		return fmt.Errorf("failer: daemonFile: %w", err)
	}
	return nil
}
