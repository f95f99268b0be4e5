package libchain

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/catena-cni/catena/cache"
)

// ErrNotReclaimed says that Reclaim left a record alone on purpose (its
// lock is held, it is gone, or Verify refused it); it is not a failure.
var ErrNotReclaimed = errors.New("not reclaimed")

// ReclaimOptions say how Reclaim tears down one record that no runtime
// asked about (the node reconciler, the agent's teardown retry).
type ReclaimOptions struct {
	// Verb names the operation in the log and the event journal.
	Verb string
	// Path is CNI_PATH: the delegates are found only there.
	Path string
	// DelegateTimeout bounds each DEL; 0 means DefaultDelegateTimeout.
	DelegateTimeout time.Duration
	// Verify, if set, is called under the lock with the record just read;
	// an error leaves the record alone (wrapped in ErrNotReclaimed).
	Verify func(rec *cache.Record) error
	// AbandonAfter, when positive, abandons (as `catenactl repair
	// --abandon` does) every step whose required DEL has failed for at
	// least that long (Step.DelFailedSince), before the teardown.
	AbandonAfter time.Duration
}

// ReclaimResult is what Reclaim did besides the teardown.
type ReclaimResult struct {
	// Abandoned are the indexes of the steps abandoned by AbandonAfter.
	Abandoned []int
}

// Reclaim tears down key's record as GC does: under its lock, taken without
// waiting, with the configs cached at ADD, in strict reverse order, and
// with the ADD's netns only while it is still that namespace. A record
// left alone yields an error wrapping ErrNotReclaimed; a teardown that
// fails leaves the record needing teardown and returns the error.
func (e *Engine) Reclaim(ctx context.Context, key cache.Key, opts ReclaimOptions) (res ReclaimResult, err error) {
	unlock, err := e.tryLock(key, opts.Verb)
	if err != nil {
		if errors.Is(err, cache.ErrLocked) {
			return res, fmt.Errorf("%s %s: %w: in flight: %w", opts.Verb, key, ErrNotReclaimed, err)
		}
		return res, fmt.Errorf("%s %s: %w", opts.Verb, key, err)
	}
	defer unlock()
	rec, err := e.Store.Load(key)
	switch {
	case errors.Is(err, cache.ErrNotFound):
		return res, fmt.Errorf("%s %s: %w: gone", opts.Verb, key, ErrNotReclaimed)
	case err != nil:
		return res, fmt.Errorf("%s %s: reading record: %w", opts.Verb, key, err)
	}
	if opts.Verify != nil {
		if err := opts.Verify(rec); err != nil {
			return res, fmt.Errorf("%s %s: %w: %w", opts.Verb, key, ErrNotReclaimed, err)
		}
	}
	conf := &NetConf{Name: key.Network, DelegateTimeout: opts.DelegateTimeout, SlowThreshold: DefaultSlowThreshold}
	if conf.DelegateTimeout <= 0 {
		conf.DelegateTimeout = DefaultDelegateTimeout
	}
	if opts.AbandonAfter > 0 {
		if res.Abandoned, err = e.abandonOverdue(ctx, rec, opts.AbandonAfter); err != nil {
			return res, fmt.Errorf("%s %s: %w", opts.Verb, key, err)
		}
	}
	tctx, t := e.begin(ctx, opts.Verb, key)
	err = e.teardown(tctx, conf, rec, argsFor(rec, opts.Path), byNobody)
	e.finish(t, conf.SlowThreshold, err)
	if err != nil {
		return res, fmt.Errorf("%s %s: %w", opts.Verb, key, err)
	}
	return res, nil
}

// abandonOverdue abandons every step of rec whose required DEL has
// failed for at least after, saves the record, and logs and events each
// as an ABANDON operation. A step without DelFailedSince (nothing says how
// long its DEL has failed) cannot be judged and is kept.
func (e *Engine) abandonOverdue(ctx context.Context, rec *cache.Record, after time.Duration) ([]int, error) {
	now := e.now()
	var idx []int
	for i := range rec.Steps {
		s := &rec.Steps[i]
		if s.State != cache.StepDelFailed || s.DelFailedSince.IsZero() || now.Sub(s.DelFailedSince) < after {
			continue
		}
		s.State, s.AbandonedAt = cache.StepAbandoned, now.UTC()
		idx = append(idx, i)
	}
	if len(idx) == 0 {
		return nil, nil
	}
	actx, t := e.begin(ctx, "ABANDON", rec.Key)
	t.pod(rec.Args)
	err := e.save(actx, rec)
	if err != nil {
		err = fmt.Errorf("recording abandoned delegates: %w", err)
	}
	for _, i := range idx {
		s := &rec.Steps[i]
		e.log().Warn("delegate abandoned: its DEL failed for longer than abandonAfter; its resources may still be held",
			"attachment", rec.Key.String(), "delegate", stepName(s), "failingSince", s.DelFailedSince,
			"abandonAfter", after, "lastDelError", s.DelError)
	}
	e.finish(t, DefaultSlowThreshold, err)
	if err != nil {
		return nil, err
	}
	return idx, nil
}
