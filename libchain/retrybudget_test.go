package libchain

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hangExec is a stuckExec whose failing DELs first run hang: they take a
// fixed time on a fake clock, or hang until the DEL is timed out.
type hangExec struct {
	*stuckExec
	hang func(ctx context.Context, c Call)
}

var _ Executor = (*hangExec)(nil)

func (h *hangExec) Run(ctx context.Context, c Call) error {
	if c.Verb == "DEL" {
		h.mu.Lock()
		stuck := h.stuck[c.Args.ContainerID]
		h.mu.Unlock()
		if stuck {
			h.hang(ctx, c)
		}
	}
	return h.stuckExec.Run(ctx, c)
}

// startLog keeps when each hung DEL started.
type startLog struct {
	mu sync.Mutex
	at []time.Time
}

func (l *startLog) add(t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at = append(l.at, t)
}

func (l *startLog) all() []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.at...)
}

// lateStarts returns the starts at or after deadline.
func lateStarts(at []time.Time, deadline time.Time) []time.Time {
	var late []time.Time
	for _, s := range at {
		if !s.Before(deadline) {
			late = append(late, s)
		}
	}
	return late
}

func firstOf(at []time.Time) time.Time {
	if len(at) == 0 {
		return time.Time{}
	}
	return slices.MinFunc(at, time.Time.Compare)
}

// TestRetryPassStartsNoAttemptPastItsBudget: 48 records, all due, whose
// DEL hangs until the retry's bound of a DEL (retryBudget, on the engine's
// fake clock), one worker. No attempt starts once the budget is spent, by
// the engine's clock, and the run returns within its budget and one DEL
// bound; what it did not attempt is deferred, still due.
func TestRetryPassStartsNoAttemptPastItsBudget(t *testing.T) {
	const n, budget = 48, time.Minute
	eng, stuck, c, conf := pendingWorld(t, n)
	c.Advance(time.Hour) // everything due
	starts := &startLog{}
	eng.Exec = &hangExec{stuckExec: stuck, hang: func(context.Context, Call) {
		starts.add(c.Now())
		c.Advance(retryBudget)
	}}

	begin := c.Now()
	deadline := begin.Add(budget)
	rep, err := eng.RetryPending(t.Context(), gcReq(conf), RetryOptions{Workers: 1, Budget: budget,
		Sleep: func(_ context.Context, d time.Duration) { c.Advance(d) }})
	require.NoError(t, err)
	took := c.Now().Sub(begin)
	at := starts.all()
	t.Logf("run took %s of its %s budget: %d attempts, %+v", took, budget, len(at), rep)

	require.NotEmpty(t, at)
	late := lateStarts(at, deadline)
	assert.Zero(t, len(late), "%d of %d attempts started past the %s budget, the first %s into the run",
		len(late), len(at), budget, firstOf(late).Sub(begin))
	assert.LessOrEqual(t, took, budget+retryBudget, "the run returns within its budget and one DEL bound")
	assert.Equal(t, int(budget/retryBudget), rep.Attempted, "one attempt per DEL bound within the budget")
	assert.Equal(t, n-rep.Attempted, rep.Deferred, "the rest is left for the next run")
}

// TestRetryPassStartsNoAttemptPastItsContext: the same 48 hung records,
// eight workers, each DEL hanging until its 200 ms delegateTimeout, on a
// machine's clock; the engine's clock stands still, so only the caller's
// context (the detached retrier gives it the budget) ends the run. No
// attempt starts after the context is done, and the run returns within
// one DEL of it.
func TestRetryPassStartsNoAttemptPastItsContext(t *testing.T) {
	const (
		n      = 48
		del    = 200 * time.Millisecond
		budget = 450 * time.Millisecond
		// slack: between a worker's check and its DEL's start, and the
		// timers' lateness on a loaded machine.
		slack = 100 * time.Millisecond
	)
	eng, stuck, c, conf := pendingWorld(t, n)
	c.Advance(time.Hour) // everything due, and the engine's clock stops here
	conf.DelegateTimeout = del
	starts := &startLog{}
	eng.Exec = &hangExec{stuckExec: stuck, hang: func(ctx context.Context, _ Call) {
		starts.add(time.Now())
		<-ctx.Done()
	}}

	ctx, cancel := context.WithTimeout(t.Context(), budget)
	t.Cleanup(cancel)
	end, _ := ctx.Deadline()
	rep, err := eng.RetryPending(ctx, gcReq(conf), RetryOptions{Linger: -1})
	require.NoError(t, err)
	returned := time.Now()
	at := starts.all()
	t.Logf("returned %s after the context's end: %d attempts, %+v", returned.Sub(end).Round(time.Millisecond), len(at), rep)

	require.NotEmpty(t, at)
	late := lateStarts(at, end.Add(slack))
	assert.Zero(t, len(late), "%d of %d attempts started after the context ended, the first %s after",
		len(late), len(at), firstOf(late).Sub(end).Round(time.Millisecond))
	assert.Less(t, returned.Sub(end), del+slack, "the run returns within one DEL of its context's end")
	assert.Positive(t, rep.Deferred, "%+v", rep)
	assert.Equal(t, n, rep.Attempted+rep.Deferred, "%+v", rep)
}
