package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain"
)

// retry retries the teardown of records that need it, whatever the
// runtime says, each when its backoff allows: oldest due first, at most
// MaxRetries a pass, RetryWorkers at a time (one hung teardown never holds
// up the others, and a stream of them never starves one that can be
// released). A record left by an operation whose process died (adding,
// tearing-down) is retried only once it is older than the grace period;
// its lock being free says nobody runs it. It returns the records whose
// teardown it finished.
func (p *pass) retry(ctx context.Context, recs []*cache.Record) map[cache.Key]bool {
	var due []*cache.Record
	for _, rec := range recs {
		key := rec.Key
		if rec.Phase != cache.PhaseNeedsTeardown && p.now.Sub(rec.Updated) < p.grace() {
			p.rep.decide(key, ActRecent, fmt.Sprintf("%s, changed within the grace period", rec.Phase))
			continue
		}
		if !p.Backoff.Due(key, p.now) {
			p.rep.decide(key, ActBackoff, "")
			continue
		}
		due = append(due, rec)
	}
	p.oldestDueFirst(due)
	if limit := p.maxRetries(); len(due) > limit {
		for _, rec := range due[limit:] {
			p.rep.decide(rec.Key, ActDeferred, fmt.Sprintf("over this pass's %d retries", limit))
		}
		due = due[:limit]
	}
	if p.Opts.DryRun {
		for _, rec := range due {
			p.rep.decide(rec.Key, ActWouldRetry, string(rec.Phase))
		}
		return map[cache.Key]bool{}
	}
	outcomes := make([]retryOutcome, len(due))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(p.retryWorkers(), len(due)) {
		wg.Go(func() {
			for i := range next {
				outcomes[i] = p.retryOne(ctx, due[i])
			}
		})
	}
	for i := range due {
		next <- i
	}
	close(next)
	wg.Wait()
	released := map[cache.Key]bool{}
	for i, rec := range due {
		if p.record(rec, outcomes[i]) {
			released[rec.Key] = true
		}
	}
	return released
}

// retryOutcome is what one retry did.
type retryOutcome struct {
	res libchain.ReclaimResult
	err error
}

func (p *pass) retryOne(ctx context.Context, rec *cache.Record) retryOutcome {
	version := Version(rec)
	res, err := p.Engine.Reclaim(ctx, rec.Key, libchain.ReclaimOptions{
		Verb: "RETRY", Path: p.Opts.CNIPath, DelegateTimeout: p.Opts.DelegateTimeout,
		AbandonAfter: p.Opts.AbandonAfter,
		Verify: func(cur *cache.Record) error {
			if cur.Phase == cache.PhaseComplete || Version(cur) != version {
				return errors.New("changed since it was read")
			}
			return nil
		},
	})
	return retryOutcome{res: res, err: err}
}

// record reports one retry's outcome; true if it released the record.
func (p *pass) record(rec *cache.Record, o retryOutcome) bool {
	key := rec.Key
	p.rep.Abandoned += len(o.res.Abandoned)
	switch {
	case o.err == nil:
		p.Backoff.Forget(key)
		p.rep.Retried++
		p.rep.Decisions = append(p.rep.Decisions, Decision{Key: key, Action: ActRetried, Abandoned: o.res.Abandoned, Reason: string(rec.Phase)})
		p.log().Info("reconcile: retried a teardown", "attachment", key.String(), "abandoned", o.res.Abandoned)
		return true
	case errors.Is(o.err, libchain.ErrNotReclaimed):
		p.rep.decide(key, ActLeft, o.err.Error())
	default:
		p.Backoff.Failed(key, p.now)
		p.rep.RetryFailed++
		p.rep.decide(key, ActRetryFailed, o.err.Error())
		p.log().Warn("reconcile: teardown retry failed; backing off", "attachment", key.String(), "error", o.err)
	}
	return false
}

// oldestDueFirst orders records by when their backoff made them due (a
// Backoff that cannot tell keeps the records' order), then by key.
func (p *pass) oldestDueFirst(recs []*cache.Record) {
	dt, ok := p.Backoff.(DueTimer)
	if !ok {
		return
	}
	due := make(map[cache.Key]time.Time, len(recs))
	for _, rec := range recs {
		due[rec.Key] = dt.DueAt(rec.Key)
	}
	slices.SortStableFunc(recs, func(a, b *cache.Record) int {
		return cmp.Or(due[a.Key].Compare(due[b.Key]), cmp.Compare(a.Key.String(), b.Key.String()))
	})
}

func (p *pass) maxRetries() int {
	return cmp.Or(max(p.Opts.MaxRetries, 0), libchain.DefaultRetryMaxAttempts)
}

func (p *pass) retryWorkers() int {
	return cmp.Or(max(p.Opts.RetryWorkers, 0), libchain.DefaultRetryWorkers)
}
