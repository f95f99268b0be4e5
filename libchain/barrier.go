package libchain

import (
	"context"
	"errors"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/catena-cni/catena/cache"
)

// holdNetwork takes req's network barrier (cache.Barrier), shared for an
// ADD until its record is first written (from then on any GC listing sees
// the ADD, and includes it in every delegate's list), exclusive for a GC's
// listing and forward to one delegate, within lockTimeout; the returned
// func releases it. A store without barriers orders nothing.
//
// What an ADD can wait: a GC holds the barrier exclusive only while it
// re-lists the network's records and forwards GC to one delegate, and
// releases it between delegates; each delegate's GC is cut at its share
// of a third of lockTimeout (gcForwardBound; teardowns of dead records run
// before, without the barrier). So an ADD waits for the barrier well under
// its lockTimeout, after which it would fail with "try again later". What
// a GC can wait: the ADDs that have not yet written their record (a lock,
// a read and one durable write each), however long their delegates then
// take.
func (e *Engine) holdNetwork(ctx context.Context, req Request, verb string, exclusive bool) (func(), error) {
	b, ok := e.Store.(cache.Barrier)
	if !ok {
		return func() {}, nil
	}
	lctx, cancel := context.WithTimeout(ctx, req.Conf.LockTimeout)
	defer cancel()
	u, err := b.Barrier(lctx, req.Conf.Name, exclusive)
	if err != nil {
		if errors.Is(err, cache.ErrLocked) {
			return nil, cniError(types.ErrTryAgainLater, "%s on network %q: %w", verb, req.Conf.Name, err)
		}
		return nil, cniError(types.ErrIOFailure, "%s on network %q: taking the network barrier: %w", verb, req.Conf.Name, err)
	}
	return func() {
		if err := u.Unlock(); err != nil {
			e.log().Error("releasing network barrier", "network", req.Conf.Name, "error", err)
		}
	}, nil
}
