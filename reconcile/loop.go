package reconcile

import (
	"context"
	"sync"
	"time"
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

	mu   sync.Mutex
	last *Report
}

// Run implements catena-agent's Runnable.
func (l *Loop) Run(ctx context.Context) error {
	t := time.NewTicker(l.Interval)
	defer t.Stop()
	for {
		if l.BeforePass != nil {
			l.BeforePass()
		}
		rep, _ := l.R.Pass(ctx)
		l.mu.Lock()
		l.last = rep
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Last is the report of the last pass, nil before the first.
func (l *Loop) Last() *Report {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}
