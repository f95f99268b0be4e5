package libchain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain/internal/failpoint"
)

// Del tears down what the attachment's record says is held, in reverse, with
// the config cached at ADD. No record (norecord.go): what Engine.Orphans
// finds of the attachment is adopted and torn down the same way
// (orphan.go); without one, a DEL handed the result of an ADD as its
// prevResult DELs every delegate best-effort, without CNI_NETNS, and a DEL
// without one invokes nothing; both succeed.
func (e *Engine) Del(ctx context.Context, req Request) error {
	return e.runVerb(ctx, "DEL", req, func(ctx context.Context, key cache.Key) error {
		return e.locked(ctx, req, key, "DEL", func(rec *cache.Record, err error) error {
			return e.del(ctx, req, key, rec, err)
		})
	})
}

// del is DEL with the attachment's lock held and its record read (loadErr
// the read's error).
func (e *Engine) del(ctx context.Context, req Request, key cache.Key, rec *cache.Record, loadErr error) error {
	switch {
	case errors.Is(loadErr, cache.ErrNotFound):
		return e.delNoRecord(ctx, req, key)
	case errors.Is(loadErr, cache.ErrCorrupt):
		e.recoverCorrupt(ctx, req, key, loadErr)
		return nil
	case loadErr != nil:
		return cniError(types.ErrIOFailure, "DEL %s: reading record: %w", key, loadErr)
	}
	if err := e.teardown(ctx, req.Conf, rec, req.Args, byRuntime); err != nil {
		return cniErrorCode(types.ErrTryAgainLater, "DEL %s: %w; still held and recorded, retry DEL", key, err)
	}
	return nil
}

// teardownBy says who asked for a teardown: it decides the teardown's
// CNI_NETNS (teardownNetNS) and how often its progress is saved.
type teardownBy int

const (
	// byRuntime is a runtime's DEL: its CNI_NETNS, checked.
	byRuntime teardownBy = iota
	// byRollback is a failed ADD's own rollback: the ADD's CNI_NETNS,
	// checked, and the record saved after every step.
	byRollback
	// byNobody is a teardown no runtime's call asked for (retry, GC,
	// repair, reclaim, an ADD finishing an earlier attempt): the
	// record's netns, passed only once proven the same namespace.
	byNobody
)

func (b teardownBy) String() string {
	switch b {
	case byRuntime:
		return "runtime"
	case byRollback:
		return "rollback"
	}
	return "record"
}

// teardown DELs the held steps of rec in strict reverse order and removes the
// record when nothing is held any more. It stops at the first required DEL
// that fails (a later delegate's state can point at an earlier one's
// resources: freeing an IP before its portmap rule is gone could route a
// new pod's traffic by a stale rule) and records the step as del-failed.
// Best-effort steps (failed or unknown ADD) never stop it.
//
// args.NetNS is checked against the namespace recorded at ADD first
// (teardownNetNS): the delegates never enter a namespace that now belongs
// to another pod.
//
// Teardown does not stop when the caller's context ends: each DEL has its
// own delegateTimeout, so a rollback is never skipped for lack of time.
//
// A teardown no runtime's DEL asked for (byNobody) leaves a tombstone of
// the key before it removes the record (tombstone.go): the runtime may
// still DEL the key with the ADD's result, and that DEL must invoke
// nothing. A rollback leaves none: libcni caches no result of a failed ADD.
//
// A rollback saves the record after every successful step, so that its
// progress can be inspected. Other teardowns do not: they save only when a
// step fails, and otherwise remove the record at the end. That is safe
// because a record that still says "added" for a step already torn down only
// makes the next DEL repeat that delegate's DEL, which the spec requires to
// succeed on missing state; it saves n-1 durable writes per DEL.
func (e *Engine) teardown(ctx context.Context, conf *NetConf, rec *cache.Record, args RuntimeArgs, by teardownBy) error {
	ctx = context.WithoutCancel(ctx)
	traceOf(ctx).pod(rec.Args)
	args.NetNS = e.teardownNetNS(ctx, rec, args.NetNS, by)
	recordEach := by == byRollback
	retry := rec.TeardownAttempts > 0
	rec.Phase = cache.PhaseTearingDown
	rec.TeardownAttempts++
	latest := latestResult(rec)
	for i := len(rec.Steps) - 1; i >= 0; i-- {
		s := &rec.Steps[i]
		if !s.Held() {
			continue
		}
		required := s.Required()
		failpoint.Hit("teardown-step")
		err := e.callDel(ctx, conf, s, latest, args)
		s.DelAttempts++
		if err != nil && required {
			s.State, s.DelError = cache.StepDelFailed, msgOf(err)
			if s.DelFailedSince.IsZero() {
				s.DelFailedSince = e.now().UTC()
			}
			return e.keepPending(ctx, rec, err, "recording the failed DEL")
		}
		s.DelError = ""
		if err != nil {
			s.DelError = msgOf(err)
			e.log().Warn("best-effort DEL failed; continuing teardown",
				"attachment", rec.Key.String(), "delegate", stepName(s), "state", "best-effort", "error", err)
		}
		s.State = cache.StepDeleted
		if recordEach && heldBefore(rec, i) {
			// Record the step; the last one is recorded by the removal.
			// A failed save is not fatal: the disk then still says
			// "held", and a later DEL repeats an idempotent DEL.
			if serr := e.save(ctx, rec); serr != nil {
				e.log().Error("recording teardown step", "attachment", rec.Key.String(), "delegate", stepName(s), "error", serr)
			}
		}
	}
	if by == byNobody {
		// Kept if the tombstone cannot be written, every step deleted: the
		// next teardown invokes nothing and tries it again. Removed now, a
		// DEL with the ADD's result would find no trace of it.
		if err := e.bury(ctx, rec); err != nil {
			return e.keepPending(ctx, rec, fmt.Errorf("everything was torn down but its tombstone could not be written: %w", err), "recording the teardown")
		}
	}
	if err := e.remove(ctx, rec.Key); err != nil {
		return fmt.Errorf("everything was torn down but the record could not be removed: %w", err)
	}
	if retry {
		e.noteTeardown(rec.Key, nil)
	}
	return nil
}

// keepPending records rec as needing teardown because of err (what saving
// it is called in the error if that fails too), notes it for the retry
// pass, and returns err.
func (e *Engine) keepPending(ctx context.Context, rec *cache.Record, err error, what string) error {
	rec.Phase, rec.LastError = cache.PhaseNeedsTeardown, err.Error()
	if serr := e.save(ctx, rec); serr != nil {
		return errors.Join(err, fmt.Errorf("%s: %w", what, serr))
	}
	e.markTeardown(rec)
	return err
}

func (e *Engine) callDel(ctx context.Context, conf *NetConf, s *cache.Step, latest json.RawMessage, args RuntimeArgs) error {
	stdin, err := withPrevResult(s.Config, s.CNIVersion, latest)
	if err != nil {
		return &delegateError{Verb: "DEL", Delegate: stepName(s), Err: err}
	}
	dctx, cancel := context.WithTimeout(ctx, conf.DelegateTimeout)
	defer cancel()
	sp := e.startCall(ctx)
	err = e.Exec.Run(dctx, Call{Verb: "DEL", Type: s.Type, Config: stdin, Args: args, Trace: sp.trace})
	e.endCall(ctx, sp, s.Index, s.Type, "DEL", err)
	if err != nil {
		return &delegateError{Verb: "DEL", Delegate: stepName(s), Err: err}
	}
	return nil
}

// heldBefore reports whether any step before index i is still held.
func heldBefore(rec *cache.Record, i int) bool {
	for j := 0; j < i; j++ {
		if rec.Steps[j].Held() {
			return true
		}
	}
	return false
}

// latestResult is the newest result the chain produced: that of the last
// step that returned one, else the prevResult Catena itself was given.
func latestResult(rec *cache.Record) json.RawMessage {
	for i := len(rec.Steps) - 1; i >= 0; i-- {
		if len(rec.Steps[i].Result) > 0 {
			return rec.Steps[i].Result
		}
	}
	return rec.PrevResult
}

// recoverCorrupt DELs every delegate of the current config best-effort so
// that nothing is wedged, then moves the untrustworthy record aside,
// loudly. In that order: a crash during the DELs leaves the record in
// place, so the next DEL repeats them (DEL is idempotent); moved aside
// first, it would leave no record, and the next DEL would tear nothing down.
func (e *Engine) recoverCorrupt(ctx context.Context, req Request, key cache.Key, cause error) {
	e.log().Error("corrupt record; tearing down best-effort from the current config, then moving it aside",
		"attachment", key.String(), "cause", cause)
	e.delEvery(ctx, req, key, req.Args, nil, "best-effort DEL after corrupt record failed")
	failpoint.Hit("before-quarantine")
	where, err := e.Store.Quarantine(key)
	failpoint.Hit("after-quarantine")
	if err != nil {
		e.log().Error("moving the corrupt record aside failed; it stays in place", "attachment", key.String(), "error", err)
		return
	}
	e.log().Warn("corrupt record moved aside", "attachment", key.String(), "quarantinedTo", where)
}

// delEvery DELs every delegate of req.Conf best-effort, in reverse, with
// args, each with its config as rendered for this call and, if prev is
// set, prev as its prevResult, converted to its version. It goes on past
// every failure, and past the end of ctx, as teardown does; it logs each
// failure as msg with the attachment and the delegate, and returns them.
// recoverCorrupt and releaseNoRecord share it.
func (e *Engine) delEvery(ctx context.Context, req Request, key cache.Key, args RuntimeArgs, prev json.RawMessage, msg string) []OpFailure {
	ctx = context.WithoutCancel(ctx)
	var failed []OpFailure
	for i := len(req.Conf.Delegates) - 1; i >= 0; i-- {
		d, err := e.resolve(ctx, req, req.Conf.Delegates[i])
		var stdin []byte
		if err == nil {
			stdin, err = delConfig(req.Conf, d, prev)
		}
		if err == nil {
			dctx, cancel := context.WithTimeout(ctx, req.Conf.DelegateTimeout)
			sp := e.startCall(ctx)
			err = e.Exec.Run(dctx, Call{Verb: "DEL", Type: d.Type, Config: stdin, Args: args, Trace: sp.trace})
			e.endCall(ctx, sp, d.Index, d.Type, "DEL", err)
			cancel()
		}
		if err != nil {
			text := BoundText(msgOf(err))
			e.log().Warn(msg, "attachment", key.String(), "delegate", d.String(), "error", text)
			failed = append(failed, OpFailure{Index: d.Index, Type: d.Type, Error: text})
		}
	}
	return failed
}

// delConfig is d's DEL config from conf: its config with conf's
// runtimeConfig and, if prev is set, prev as its prevResult.
func delConfig(conf *NetConf, d Delegate, prev json.RawMessage) ([]byte, error) {
	fields, err := d.Config(conf.Name, conf.RuntimeConfig)
	if err != nil {
		return nil, err
	}
	stdin, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("%s: encoding config: %w", d, err)
	}
	stdin, err = withPrevResult(stdin, d.CNIVersion, prev)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d, err)
	}
	return stdin, nil
}
