package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
