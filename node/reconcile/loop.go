package reconcile

import (
	"context"
	"errors"
	"time"

	"github.com/catena-cni/catena/cache"
)

// Loop runs a pass at once and then every Interval until ctx is done. A
// failed pass is logged (by Pass) and the loop goes on: errors mean keep,
// never stop.
type Loop struct {
	R        *Reconciler
	Interval time.Duration
	// BeforePass, if set, runs before each pass (the metrics read the
	// event journal there).
	BeforePass func()
}

// Run implements catena-agent's Runnable. While it runs it holds the
// cache dir's retrier lock (R.RetrierDir, if set), taken at the first pass
// that finds it free: catena then starts no retrier of its own, the loop's
// passes do that work.
func (l *Loop) Run(ctx context.Context) error {
	t := time.NewTicker(l.Interval)
	defer t.Stop()
	var lock *cache.RetrierLock
	defer func() {
		if lock != nil {
			_ = lock.Close()
		}
	}()
	for {
		if lock == nil && l.R.RetrierDir != "" {
			lock = l.takeRetrierLock()
		}
		if l.BeforePass != nil {
			l.BeforePass()
		}
		// the report is in the log and the metrics (Observer); the
		// loop keeps none of it, a pass's decisions on 10,000 records
		// being megabytes
		_, _ = l.R.Pass(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// takeRetrierLock takes the retrier lock without waiting; nil if a catena
// retrier holds it (it exits within its budget) or it cannot be had.
func (l *Loop) takeRetrierLock() *cache.RetrierLock {
	lock, err := cache.TryRetrierLock(l.R.RetrierDir)
	if err != nil && !errors.Is(err, cache.ErrLocked) {
		l.R.log().Warn("reconcile: taking the retrier lock", "error", err)
	}
	return lock
}
