package libchain

import (
	"cmp"
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/catena-cni/catena/cache"
)

// Pending teardowns are retried outside the runtime's calls: no ADD or DEL
// ever runs another attachment's teardown. After a runtime's call, KickRetry
// looks at the network's retry stamp (cache.RetryScheduler: one lstat and
// one small read, no marker) and, only if a pass may be due, asks the
// Retrier to start one: catena starts a detached process of its own
// (ProcKicker) that holds the cache dir's retrier lock, so at most one runs
// per cache dir, and does nothing if catena-agent, whose reconcile loop
// holds that lock while it runs, does the work.
//
// A pass (RetryPending) reads the network's markers and retries the due
// ones oldest-due first, at most MaxAttempts of them, Workers at a time,
// each DEL bounded by retryBudget; it then writes the stamp, and passes
// again while the next due is within Linger, until Budget is spent.
//
// The Budget is kept by the engine's clock and the caller's context: no
// attempt starts once either says it is spent (checked by each worker
// just before it starts one). An attempt already running is not cut: its
// teardown ignores cancellation, so that it never stops between a DEL and
// its record, and ends by itself, each DEL within retryBudget, at the
// first required DEL that fails. A run thus returns by Budget plus one
// attempt (one retryBudget when the attempt's first DEL hangs); what it
// did not start stays due for the next run.

// Defaults of RetryOptions.
const (
	DefaultRetryMaxAttempts = 128
	DefaultRetryWorkers     = 8
	DefaultRetryBudget      = time.Minute
	DefaultRetryLinger      = 5 * time.Second
	// retryStampHorizon bounds how far ahead a stamp may put the next
	// pass: a change the stamp missed waits no longer than this.
	retryStampHorizon = time.Minute
)

// retryBudget bounds each DEL of a retry (or delegateTimeout, if shorter).
const retryBudget = 5 * time.Second

// RetryKicker starts a retry pass of a network's pending teardowns outside
// the runtime's call (ProcKicker).
type RetryKicker interface {
	Kick(req Request) error
}

// RetryOptions bound a retry pass.
type RetryOptions struct {
	// MaxAttempts bounds the records tried in one pass; 0: the default.
	MaxAttempts int
	// Workers bounds the attempts run at once; 0: the default.
	Workers int
	// Budget bounds the whole run, passes and lingering, by the engine's
	// clock; no attempt starts after it. 0: the default.
	Budget time.Duration
	// Linger: pass again while the next due is at most this far; 0: the
	// default, negative: one pass.
	Linger time.Duration
	// Sleep waits d or until ctx is done; nil: a real timer.
	Sleep func(ctx context.Context, d time.Duration)
}

func (o RetryOptions) withDefaults() RetryOptions {
	o.MaxAttempts = cmp.Or(max(o.MaxAttempts, 0), DefaultRetryMaxAttempts)
	o.Workers = cmp.Or(max(o.Workers, 0), DefaultRetryWorkers)
	o.Budget = cmp.Or(max(o.Budget, 0), DefaultRetryBudget)
	o.Linger = cmp.Or(o.Linger, DefaultRetryLinger)
	if o.Sleep == nil {
		o.Sleep = sleepCtx
	}
	return o
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// RetryReport is what RetryPending did.
type RetryReport struct {
	Passes    int `json:"passes"`
	Attempted int `json:"attempted"`
	Released  int `json:"released"`
	Failed    int `json:"failed"`
	Skipped   int `json:"skipped"`
	// Deferred counts the due records not attempted because the budget
	// or the context ended first; they stay due.
	Deferred int `json:"deferred"`
	// Next is when the earliest teardown left is due (zero: none left).
	Next time.Time `json:"next"`
}

// KickRetry, called after a runtime's call on req's network, starts a retry
// pass through e.Retrier if one may be due. With nothing pending it costs
// one failed lstat; it never runs a teardown itself.
func (e *Engine) KickRetry(req Request) {
	rs, ok := e.Store.(cache.RetryScheduler)
	if e.Retrier == nil || !ok || req.Conf == nil {
		return
	}
	due, err := rs.RetryDue(req.Conf.Name, e.now())
	if err != nil {
		e.log().Warn("checking for pending teardowns", "network", req.Conf.Name, "error", err)
		return
	}
	if !due {
		return
	}
	if err := e.Retrier.Kick(req); err != nil {
		e.log().Warn("starting the teardown retrier", "network", req.Conf.Name, "error", err)
	}
}

// RetryPending retries the pending teardowns of req's network (see above).
// The caller holds the cache dir's retrier lock. Only req.Conf and
// req.Args.Path are used. No attempt starts once ctx is done or the
// engine's clock reaches opts.Budget from now.
func (e *Engine) RetryPending(ctx context.Context, req Request, opts RetryOptions) (RetryReport, error) {
	var rep RetryReport
	ti, ok := e.Store.(cache.TeardownIndex)
	if !ok {
		return rep, nil
	}
	opts = opts.withDefaults()
	deadline := e.now().Add(opts.Budget)
	for {
		pending, err := ti.PendingTeardown(req.Conf.Name, math.MaxInt)
		if err != nil {
			return rep, cniError(0, "retry of network %q: reading the teardown index: %w", req.Conf.Name, err)
		}
		rep.Passes++
		e.retryDue(ctx, req, dueOf(pending, e.now(), opts.MaxAttempts), opts.Workers, deadline, &rep)
		rep.Next = e.stampRetry(req.Conf.Name)
		if rep.Released > 0 && rep.Passes == 1 {
			e.pruneTombstones(req.Conf.Name)
		}
		now := e.now()
		if rep.Next.IsZero() || opts.Linger < 0 || rep.Next.Sub(now) > opts.Linger ||
			!rep.Next.Before(deadline) || !now.Before(deadline) || ctx.Err() != nil {
			return rep, nil
		}
		if wait := rep.Next.Sub(now); wait > 0 {
			opts.Sleep(ctx, wait)
		}
	}
}

// dueOf returns the pending entries due at now, oldest due first (the
// index's order), at most limit.
func dueOf(pending []cache.Pending, now time.Time, limit int) []cache.Pending {
	i := 0
	for i < len(pending) && !pending[i].Note.Due.After(now) {
		i++
	}
	return pending[:min(i, limit)]
}

// retryDue runs the attempts, workers at a time. Each worker takes its
// next record only while ctx is live and the engine's clock is before
// deadline, so no attempt starts past either (a worker may wait a whole
// attempt between two records: the check is made when it is free, not
// when the record was queued). The records left are counted as deferred.
func (e *Engine) retryDue(ctx context.Context, req Request, due []cache.Pending, workers int, deadline time.Time, rep *RetryReport) {
	var mu sync.Mutex
	taken := 0
	take := func() (cache.Pending, bool) {
		mu.Lock()
		defer mu.Unlock()
		if taken == len(due) || ctx.Err() != nil || !e.now().Before(deadline) {
			return cache.Pending{}, false
		}
		taken++
		return due[taken-1], true
	}
	var wg sync.WaitGroup
	for range min(workers, len(due)) {
		wg.Go(func() {
			for {
				p, ok := take()
				if !ok {
					return
				}
				out := e.retryOne(ctx, req, p)
				mu.Lock()
				rep.Attempted++
				switch out {
				case retryReleased:
					rep.Released++
				case retryFailed:
					rep.Failed++
				default:
					rep.Skipped++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	rep.Deferred += len(due) - taken
}

type retryOutcome int

const (
	retrySkipped retryOutcome = iota
	retryReleased
	retryFailed
)

// retryOne retries one record's teardown. Before the attempt its note is
// pushed out as if it had failed once more: if this process is killed
// during a hung DEL, the record is not due again at once. A failed attempt
// then writes the note again from the record (teardown), a successful one
// clears it.
func (e *Engine) retryOne(ctx context.Context, req Request, p cache.Pending) retryOutcome {
	if p.Bad != nil {
		e.log().Warn("unreadable teardown note: retrying now", "attachment", p.Key.String(), "error", p.Bad)
	}
	lease := max(p.Note.Attempts+1, 1)
	e.noteTeardown(p.Key, &cache.PendingNote{Due: e.now().Add(retryBackoff(lease)), Attempts: lease})
	bounded := *req.Conf
	bounded.DelegateTimeout = min(bounded.DelegateTimeout, retryBudget)
	err := e.repairOne(ctx, Request{Conf: &bounded, Args: req.Args}, p.Key, "RETRY")
	var skip *skipError
	switch {
	case err == nil:
		e.log().Info("retried a pending teardown", "attachment", p.Key.String())
		return retryReleased
	case errors.As(err, &skip):
		if skip.reason == "complete" {
			e.noteTeardown(p.Key, nil) // stale: the attachment was added again
		}
		return retrySkipped
	default:
		e.log().Warn("retrying a pending teardown failed; it stays recorded", "attachment", p.Key.String(),
			"attempts", lease, "error", err)
		return retryFailed
	}
}

// stampRetry writes the network's retry stamp and returns when the next
// teardown is due (zero if nothing is pending or the store keeps no stamp).
func (e *Engine) stampRetry(network string) time.Time {
	rs, ok := e.Store.(cache.RetryScheduler)
	if !ok {
		return time.Time{}
	}
	st, err := rs.StampRetry(network, e.now, retryStampHorizon)
	if err != nil {
		e.log().Warn("writing the retry stamp", "network", network, "error", err)
		return time.Time{}
	}
	if st.Next.IsZero() || st.Next.Sub(e.now()) >= retryStampHorizon {
		return time.Time{} // nothing pending within the horizon
	}
	return st.Next
}
