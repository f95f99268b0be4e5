package main

import (
	"log/slog"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// memoryLimitShare is the share of the container's memory limit that the
// Go runtime's soft limit is set to: the rest is room for what the runtime
// does not count (goroutine stacks beyond its accounting, the delegates'
// pipes) before the kernel's OOM killer acts.
const memoryLimitShare = 0.8

type memLimitFlags struct {
	limit int64
}

func (f *memLimitFlags) register(cmd *cobra.Command) {
	cmd.Flags().Int64Var(&f.limit, "memory-limit", 0,
		"the container's memory limit in bytes (the DaemonSet sets it from limits.memory): the Go runtime's soft memory limit is set to 80% of it, unless GOMEMLIMIT is set, so that the collector returns memory before the kernel's OOM killer acts (0: none)")
}

// apply sets the Go runtime's soft memory limit.
func (f *memLimitFlags) apply(getenv func(string) string, log *slog.Logger) {
	switch {
	case f.limit <= 0:
		return
	case getenv("GOMEMLIMIT") != "":
		log.Info("GOMEMLIMIT is set: --memory-limit leaves it", "GOMEMLIMIT", getenv("GOMEMLIMIT"))
		return
	}
	soft := int64(float64(f.limit) * memoryLimitShare)
	debug.SetMemoryLimit(soft)
	log.Info("go memory limit", "container_limit_bytes", f.limit, "soft_limit_bytes", soft)
}
