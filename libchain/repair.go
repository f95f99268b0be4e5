package libchain

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/catena-cni/catena/cache"
)

// RepairFailure is a record whose teardown failed again.
type RepairFailure struct {
	Key   cache.Key `json:"key"`
	Error string    `json:"error"`
}

// RepairReport is what Repair did.
type RepairReport struct {
	Repaired []cache.Key     `json:"repaired"`
	Failed   []RepairFailure `json:"failed"`
	Skipped  []GCSkip        `json:"skipped"`
}

// Repair retries the teardown of records that need it, whatever the
// runtime does: keys, or with nil every record of req's network that is not
// complete. A record whose lock is held is skipped (an operation runs it). A
// complete record named in keys is skipped too: it is live.
func (e *Engine) Repair(ctx context.Context, req Request, keys []cache.Key) (*RepairReport, error) {
	rep := &RepairReport{Repaired: []cache.Key{}, Failed: []RepairFailure{}, Skipped: []GCSkip{}}
	explicit := keys != nil
	if !explicit {
		all, err := e.Store.List()
		if err != nil {
			return rep, cniError(types.ErrIOFailure, "repair of network %q: listing records: %w", req.Conf.Name, err)
		}
		for _, k := range all {
			if k.Network == req.Conf.Name {
				keys = append(keys, k)
			}
		}
	}
	for _, key := range keys {
		err := e.repairOne(ctx, req, key, "REPAIR")
		var skip *skipError
		switch {
		case err == nil:
			rep.Repaired = append(rep.Repaired, key)
		case errors.As(err, &skip):
			if explicit || skip.reason != "complete" {
				rep.Skipped = append(rep.Skipped, GCSkip{Key: key, Reason: skip.reason})
			}
		default:
			rep.Failed = append(rep.Failed, RepairFailure{Key: key, Error: msgOf(err)})
		}
	}
	if len(rep.Failed) > 0 {
		return rep, cniErrorCode(types.ErrTryAgainLater, "repair of network %q: %d record(s) still need teardown", req.Conf.Name, len(rep.Failed))
	}
	return rep, nil
}

// skipError says why a record was left alone; it is not a failure.
type skipError struct{ reason string }

func (e *skipError) Error() string { return e.reason }

// repairOne tears down one record that needs it, under its lock taken
// without waiting, as one traced operation.
func (e *Engine) repairOne(ctx context.Context, req Request, key cache.Key, verb string) (err error) {
	ctx, t := e.begin(ctx, verb, key)
	defer func() {
		var skip *skipError
		if !errors.As(err, &skip) {
			e.finish(t, req.Conf.SlowThreshold, err)
		}
	}()
	unlock, err := e.tryLock(key, verb)
	if err != nil {
		if errors.Is(err, cache.ErrLocked) {
			return &skipError{reason: "in flight: " + msgOf(err)}
		}
		return err
	}
	defer unlock()
	rec, err := e.Store.Load(key)
	switch {
	case errors.Is(err, cache.ErrNotFound):
		e.noteTeardown(key, nil)
		return &skipError{reason: "gone"}
	case err != nil:
		return fmt.Errorf("%s: reading record: %w", key, err)
	case !needsTeardown(rec):
		return &skipError{reason: "complete"}
	}
	if err := e.teardown(ctx, req.Conf, rec, argsFor(rec, req.Args.Path), byNobody); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	for _, s := range rec.Steps {
		if s.State == cache.StepAbandoned {
			e.log().Warn("teardown finished past an abandoned delegate: its resources may still be held",
				"attachment", key.String(), "delegate", stepName(&s), "abandonedAt", s.AbandonedAt, "lastDelError", s.DelError)
		}
	}
	return nil
}

// Abandon records step index of key's record as abandoned at now, so that
// teardown continues past a DEL that can never succeed (its binary is gone,
// say). The record keeps the step, its last DEL error and when it was
// abandoned; the next repair, GC or DEL then finishes the teardown. ctx
// bounds the wait for the attachment's lock (DefaultLockTimeout if it has
// no deadline).
func (e *Engine) Abandon(ctx context.Context, key cache.Key, index int, now time.Time) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultLockTimeout)
		defer cancel()
	}
	u, err := e.Store.Lock(ctx, key, cache.Holder{PID: os.Getpid(), Verb: "ABANDON", Since: now})
	if err != nil {
		return fmt.Errorf("abandon %s: %w", key, err)
	}
	defer e.releaser(u, key)()
	rec, err := e.Store.Load(key)
	if err != nil {
		return fmt.Errorf("abandon %s: %w", key, err)
	}
	if index < 0 || index >= len(rec.Steps) {
		return fmt.Errorf("abandon %s: no delegate %d (the record has %d)", key, index, len(rec.Steps))
	}
	if rec.Phase == cache.PhaseComplete {
		return fmt.Errorf("abandon %s: the attachment is complete and live; only a record that needs teardown can have a delegate abandoned", key)
	}
	s := &rec.Steps[index]
	if !s.Held() {
		return fmt.Errorf("abandon %s: %s is %s, it holds nothing", key, stepName(s), s.State)
	}
	s.State, s.AbandonedAt = cache.StepAbandoned, now.UTC()
	if err := e.save(ctx, rec); err != nil {
		return fmt.Errorf("abandon %s: %w", key, err)
	}
	// Due at once: the operator wants the teardown finished.
	e.noteTeardown(key, &cache.PendingNote{Due: now, Attempts: rec.TeardownAttempts})
	e.log().Warn("delegate abandoned by the operator", "attachment", key.String(), "delegate", stepName(s))
	return nil
}
