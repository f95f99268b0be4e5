package libchain

import (
	"context"

	"github.com/catena-cni/catena/cache"
)

// runVerb runs one runtime call of ADD, DEL or CHECK on req's attachment
// inside its trace: the key is checked first, then run is handed it, and
// run's error is the trace's outcome.
func (e *Engine) runVerb(ctx context.Context, verb string, req Request, run func(context.Context, cache.Key) error) (err error) {
	ctx, t := e.begin(ctx, verb, req.Key())
	t.pod(req.Args.Args)
	defer func() { e.finish(t, req.Conf.SlowThreshold, err) }()
	key, err := validKey(req)
	if err != nil {
		return err
	}
	return run(ctx, key)
}

// locked takes the attachment's lock, reads its record and hands run the
// record and the read's error, holding the lock until run returns: how DEL
// and CHECK begin. A lock not taken is returned as is and run is not called.
func (e *Engine) locked(ctx context.Context, req Request, key cache.Key, verb string, run func(*cache.Record, error) error) error {
	unlock, err := e.lock(ctx, req, key, verb)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := e.Store.Load(key)
	return run(rec, err)
}
