package libchain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/catena-cni/catena/cache"
)

// Check forwards CHECK to the delegates in order, each with its cached config
// and the cached final result. It is an error if there is no complete record.
func (e *Engine) Check(ctx context.Context, req Request) error {
	return e.runVerb(ctx, "CHECK", req, func(ctx context.Context, key cache.Key) error {
		return e.locked(ctx, req, key, "CHECK", func(rec *cache.Record, err error) error {
			return e.check(ctx, req, key, rec, err)
		})
	})
}

// check is CHECK with the attachment's lock held and its record read
// (loadErr the read's error).
func (e *Engine) check(ctx context.Context, req Request, key cache.Key, rec *cache.Record, loadErr error) error {
	switch {
	case errors.Is(loadErr, cache.ErrNotFound):
		return cniError(types.ErrUnknownContainer, "CHECK %s: no record: the attachment was never added or was deleted", key)
	case loadErr != nil:
		return cniError(types.ErrIOFailure, "CHECK %s: reading record: %w", key, loadErr)
	case rec.Phase != cache.PhaseComplete:
		return cniError(types.ErrUnknownContainer, "CHECK %s: the attachment is not complete (phase %s)", key, rec.Phase)
	}
	prev := newPrevResults(rec.Result)
	for i := range rec.Steps {
		s := &rec.Steps[i]
		if !atLeast(s.CNIVersion, "0.4.0") {
			continue // CHECK does not exist before 0.4.0
		}
		stdin, err := prev.stdin(s.Config, s.CNIVersion)
		if err == nil {
			dctx, cancel := context.WithTimeout(ctx, req.Conf.DelegateTimeout)
			sp := e.startCall(ctx)
			err = e.Exec.Run(dctx, Call{Verb: "CHECK", Type: s.Type, Config: stdin, Args: req.Args, Trace: sp.trace})
			e.endCall(ctx, sp, s.Index, s.Type, "CHECK", err)
			cancel()
		}
		if err != nil {
			return cniError(types.ErrInternal, "CHECK %s: %w", key, &delegateError{Verb: "CHECK", Delegate: stepName(s), Err: err})
		}
	}
	return nil
}

// Status reports Catena's own health (its cache dir must take a record),
// then forwards STATUS to every delegate that supports CNI 1.1.0 and returns
// the first unavailability, naming the delegate.
func (e *Engine) Status(ctx context.Context, req Request) (err error) {
	ctx, t := e.begin(ctx, "STATUS", cache.Key{})
	defer func() { e.finish(t, req.Conf.SlowThreshold, err) }()
	return e.status(ctx, req)
}

func (e *Engine) status(ctx context.Context, req Request) error {
	if p, ok := e.Store.(cache.Prober); ok {
		if err := p.Probe(); err != nil {
			return cniErrorCode(types.ErrPluginNotAvailable, "STATUS of network %q: catena cannot record attachments: %w", req.Conf.Name, err)
		}
	}
	req, err := e.resolveAll(ctx, req, "STATUS")
	if err != nil {
		return err
	}
	for _, d := range req.Conf.Delegates {
		if !atLeast(d.CNIVersion, "1.1.0") {
			continue
		}
		if err := e.runPlain(ctx, req, d, "STATUS", nil); err != nil {
			return cniError(types.ErrPluginNotAvailable, "STATUS of network %q: %w", req.Conf.Name, err)
		}
	}
	return nil
}

// GC tears down Catena's records that the runtime's
// cni.dev/valid-attachments (or cni.dev/attachments) no longer lists, then forwards GC to the
// delegates (see CollectGarbage). It continues past errors and reports them
// all.
func (e *Engine) GC(ctx context.Context, req Request) (err error) {
	ctx, t := e.begin(ctx, "GC", cache.Key{})
	defer func() { e.finish(t, req.Conf.SlowThreshold, err) }()
	if req.Conf.DisableGC {
		e.log().Info("GC disabled by disableGC", "network", req.Conf.Name)
		return nil
	}
	valid, err := parseValid(req.Conf.ValidAttachments, req.Conf.Attachments)
	if err != nil {
		return err
	}
	rep, err := e.collectGarbage(ctx, req, GCOptions{Valid: valid})
	if rep != nil && len(rep.TornDown)+len(rep.Skipped)+len(rep.SweptTemps) > 0 {
		e.log().Info("GC", "network", req.Conf.Name, "tornDown", rep.TornDown, "skipped", rep.Skipped, "sweptTemps", rep.SweptTemps)
	}
	return err
}

// runPlain invokes a verb that needs no attachment with the delegate's
// current config.
func (e *Engine) runPlain(ctx context.Context, req Request, d Delegate, verb string, extra map[string]json.RawMessage) error {
	fields, err := d.Config(req.Conf.Name, nil)
	if err != nil {
		return err
	}
	for k, v := range extra {
		fields[k] = v
	}
	stdin, err := json.Marshal(fields)
	if err != nil {
		return fmt.Errorf("%s: encoding config: %w", d, err)
	}
	dctx, cancel := context.WithTimeout(ctx, req.Conf.DelegateTimeout)
	defer cancel()
	sp := e.startCall(ctx)
	err = e.Exec.Run(dctx, Call{Verb: verb, Type: d.Type, Config: stdin, Args: RuntimeArgs{Path: req.Args.Path}, Trace: sp.trace})
	e.endCall(ctx, sp, d.Index, d.Type, verb, err)
	if err != nil {
		err = e.disowned(d, err)
		return &delegateError{Verb: verb, Delegate: d.String(), Err: err}
	}
	return nil
}
