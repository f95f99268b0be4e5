package libchain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/catena-cni/catena/cache"
)

// Add runs the chain's ADD, recording every step durably. On failure it rolls
// back, in reverse, everything that succeeded.
func (e *Engine) Add(ctx context.Context, req Request) (types.Result, error) {
	var res types.Result
	err := e.runVerb(ctx, "ADD", req, func(ctx context.Context, key cache.Key) (err error) {
		// No other attachment's teardown is ever retried here: see KickRetry.
		res, err = e.add(ctx, req, key)
		return err
	})
	return res, err
}

func (e *Engine) add(ctx context.Context, req Request, key cache.Key) (types.Result, error) {
	var err error
	// Before any lock or hold: a VERSION not cached yet may take a while.
	if req, err = e.resolveAll(ctx, req, "ADD"); err != nil {
		return nil, err
	}
	// No GC lists the network until this ADD's record is written: from
	// then on a GC's listing sees it (barrier.go).
	hold, err := e.holdNetwork(ctx, req, "ADD", false)
	if err != nil {
		return nil, err
	}
	var once sync.Once
	release := func() { once.Do(hold) }
	defer release()
	unlock, err := e.lock(ctx, req, key, "ADD")
	if err != nil {
		return nil, err
	}
	defer unlock()

	if err := e.clearEarlier(ctx, req, key); err != nil {
		return nil, err
	}
	rec, err := e.newRecord(req, key)
	if err != nil {
		return nil, err
	}
	latest := req.Conf.PrevResult
	for i := range rec.Steps {
		s := &rec.Steps[i]
		stdin, err := withPrevResult(s.Config, s.CNIVersion, latest)
		if err != nil {
			return nil, e.rollback(ctx, req, rec, fmt.Errorf("%s: %w", stepName(s), err), types.ErrDecodingFailure)
		}
		s.State, s.Started = cache.StepStarting, e.now()
		// This write also carries the previous step's result: n delegates
		// cost n+1 durable writes. The delegate's process starts while it
		// is made durable, but gets its request only after (see gate.go).
		// rec is not touched until the write is done.
		gate := openAfter(func() error {
			err := e.save(ctx, rec)
			if err == nil && i == 0 {
				release()
			}
			return err
		})
		res, err := e.callAdd(withGate(ctx, gate), req, s, stdin)
		if serr := gate.wait(); serr != nil {
			s.State = cache.StepPending // it never got its request
			return nil, e.rollback(ctx, req, rec, fmt.Errorf("recording %s starting: %w", stepName(s), serr), types.ErrIOFailure)
		}
		s.Finished = e.now()
		if err != nil {
			def := types.ErrInternal
			s.State = cache.StepAddFailed
			if isTimeout(err) {
				s.State, def = cache.StepUnknown, types.ErrTryAgainLater
			}
			s.Error = msgOf(err)
			return nil, e.rollback(ctx, req, rec, err, def)
		}
		s.State, s.Result = cache.StepAdded, res
		latest = res
	}
	final, err := convertResult(latest, req.Conf.CNIVersion)
	if err != nil {
		return nil, e.rollback(ctx, req, rec, fmt.Errorf("final result: %w", err), types.ErrIncompatibleCNIVersion)
	}
	rec.Phase, rec.Result = cache.PhaseComplete, final
	if err := e.save(ctx, rec); err != nil {
		return nil, e.rollback(ctx, req, rec, fmt.Errorf("recording completion: %w", err), types.ErrIOFailure)
	}
	// A pending note of this key is stale now (one whose clearing failed
	// after an earlier teardown): one unlink, usually of nothing.
	e.noteTeardown(key, nil)
	return decodeResult(final)
}

// callAdd invokes one delegate's ADD within delegateTimeout and returns its
// result as JSON.
func (e *Engine) callAdd(ctx context.Context, req Request, s *cache.Step, stdin []byte) (json.RawMessage, error) {
	dctx, cancel := context.WithTimeout(ctx, req.Conf.DelegateTimeout)
	defer cancel()
	sp := e.startCall(ctx)
	res, err := e.Exec.Add(dctx, Call{Verb: "ADD", Type: s.Type, Config: stdin, Args: req.Args, Trace: sp.trace})
	e.endCall(ctx, sp, s.Index, s.Type, "ADD", err)
	if err != nil {
		if s.Index >= 0 && s.Index < len(req.Conf.Delegates) {
			err = e.disowned(req.Conf.Delegates[s.Index], err)
		}
		if isTimeout(err) && dctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("timed out after %s (delegateTimeout), outcome unknown: %w", req.Conf.DelegateTimeout, err)
		}
		return nil, &delegateError{Verb: "ADD", Delegate: stepName(s), Err: err}
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return nil, &delegateError{Verb: "ADD", Delegate: stepName(s), Err: fmt.Errorf("encoding its result: %w", err)}
	}
	return raw, nil
}

// newRecord builds the record of a fresh ADD, with every delegate's config
// as it will be sent (prevResult aside) cached for DEL and CHECK.
func (e *Engine) newRecord(req Request, key cache.Key) (*cache.Record, error) {
	now := e.now()
	rec := &cache.Record{
		Key: key, Phase: cache.PhaseAdding, CNIVersion: req.Conf.CNIVersion,
		NetNS: req.Args.NetNS, NetNSID: e.netnsIdentity(key, req.Args.NetNS), Args: req.Args.Args, PrevResult: req.Conf.PrevResult,
		Created: now, Updated: now,
	}
	for _, d := range req.Conf.Delegates {
		conf, err := d.Config(req.Conf.Name, req.Conf.RuntimeConfig)
		if err != nil {
			return nil, cniError(types.ErrInvalidNetworkConfig, "ADD %s: %w", key, err)
		}
		raw, err := json.Marshal(conf)
		if err != nil {
			return nil, cniError(types.ErrInvalidNetworkConfig, "ADD %s: %s: encoding config: %w", key, d, err)
		}
		rec.Steps = append(rec.Steps, cache.Step{
			Index: d.Index, Type: d.Type, CNIVersion: d.CNIVersion, Config: raw, State: cache.StepPending,
		})
	}
	return rec, nil
}

// clearEarlier deals with a record left by an earlier operation on the same
// attachment before a new ADD starts.
func (e *Engine) clearEarlier(ctx context.Context, req Request, key cache.Key) error {
	rec, err := e.Store.Load(key)
	switch {
	case errors.Is(err, cache.ErrNotFound):
		return nil
	case errors.Is(err, cache.ErrCorrupt):
		e.recoverCorrupt(ctx, req, key, err)
		return nil
	case err != nil:
		return cniError(types.ErrIOFailure, "ADD %s: reading record: %w", key, err)
	case rec.Phase == cache.PhaseComplete:
		return cniError(types.ErrInvalidEnvironmentVariables,
			"ADD %s: already added (CNI_CONTAINERID and CNI_IFNAME are in use on network %q); DEL it first", key, key.Network)
	}
	e.log().Warn("finishing teardown left by an earlier operation before ADD",
		"attachment", key.String(), "phase", string(rec.Phase))
	args := req.Args
	args.NetNS = rec.NetNS // the earlier attempt's netns, if still that namespace
	if err := e.teardown(ctx, req.Conf, rec, args, byNobody); err != nil {
		return cniErrorCode(types.ErrTryAgainLater, "ADD %s: an earlier attempt still holds resources that could not be torn down: %w", key, err)
	}
	return nil
}

// rollback tears down a failed ADD and returns the error to report, which
// keeps the code of the cause.
func (e *Engine) rollback(ctx context.Context, req Request, rec *cache.Record, cause error, def uint) error {
	rec.AddError = msgOf(cause)
	code := codeOf(cause, def)
	traceOf(ctx).rolledBack()
	if err := e.teardown(ctx, req.Conf, rec, req.Args, byRollback); err != nil {
		return types.NewError(code, fmt.Sprintf("catena: ADD %s: %s; rollback incomplete, still held and recorded for the next DEL: %s",
			rec.Key, msgOf(cause), msgOf(err)), "")
	}
	return types.NewError(code, fmt.Sprintf("catena: ADD %s: %s; rolled back", rec.Key, msgOf(cause)), "")
}
