package main

import (
	"context"
	"os"

	"github.com/catena-cni/catena/libchain"
)

// retrier runs a detached retry pass (libchain.ProcKicker started this
// process): it takes over the retrier lock, retries the network's pending
// teardowns within the pass's bounds, and exits. Its stdio is /dev/null: it
// logs to the config's logFile, and its operations reach the event journal.
func retrier() int {
	raw, lockOf, err := libchain.RetrierInherited()
	if err != nil {
		return 2
	}
	conf, err := libchain.ParseConfig(raw)
	if err != nil {
		return 2
	}
	eng, closeLog, err := newEngine(conf)
	if err != nil {
		return 2
	}
	defer closeLog()
	lock, err := lockOf(conf.CacheDir)
	if err != nil {
		eng.Log.Error("retrier: not started", "network", conf.Name, "error", err)
		return 2
	}
	defer func() { _ = lock.Close() }()
	req := libchain.Request{Conf: conf, Args: libchain.RuntimeArgs{Path: os.Getenv("CNI_PATH")}}
	// The context ends with the run's budget too: it cuts a sleep between
	// passes, and no attempt starts after it (one running finishes). It
	// carries no trace context: the pass is no part of the runtime call
	// that started it, whose TRACEPARENT this process inherited, and its
	// delegates get none (libchain/invoke strips it).
	ctx, cancel := context.WithTimeout(context.Background(), libchain.DefaultRetryBudget)
	defer cancel()
	rep, err := eng.RetryPending(ctx, req, libchain.RetryOptions{Budget: libchain.DefaultRetryBudget})
	if err != nil {
		eng.Log.Error("retrier", "network", conf.Name, "error", err)
		return 1
	}
	eng.Log.Info("retrier: done", "network", conf.Name, "passes", rep.Passes, "attempted", rep.Attempted,
		"released", rep.Released, "failed", rep.Failed, "skipped", rep.Skipped, "deferred", rep.Deferred)
	return 0
}
