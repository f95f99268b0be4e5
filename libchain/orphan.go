package libchain

import (
	"context"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/catena-cni/catena/cache"
)

// OrphanFinder looks, for a DEL that finds no record, for the same
// attachment made by the node's primary CNI before Catena was in front of
// it (package libchain/libcnientry reads the runtime's libcni cache entry
// of it), so that the DEL tears it down instead of leaking it.
type OrphanFinder interface {
	// FindOrphan returns the complete record of key's attachment as the
	// primary made it, or nil if there is none to adopt (nothing found,
	// or found but not usable or not trusted: the finder logs why). It
	// runs under key's lock, which it must not take. An error means the
	// source could not be read: the DEL fails, and the runtime retries it.
	FindOrphan(key cache.Key) (*Orphan, error)
}

// Orphan is an attachment a DEL adopts.
type Orphan struct {
	// Record is the attachment as a complete Catena ADD would have left
	// it; its Key is the DEL's.
	Record *cache.Record
	// Source names where it was found, for the logs.
	Source string
	// Settle, if set, is called under key's lock once the teardown is
	// complete and the record gone: it removes the source, so that nothing
	// adopts the attachment again (the agent's Adopter confirms an
	// adoption by the source's presence under the same lock).
	Settle func() error
}

// delOrphan is a DEL with no record: it tears down, as a DEL of a recorded
// attachment, the orphan Engine.Orphans finds, if any, and reports whether
// it found one. A failed teardown leaves the record saved and pending, as
// any DEL does.
func (e *Engine) delOrphan(ctx context.Context, req Request, key cache.Key) (bool, error) {
	if e.Orphans == nil {
		return false, nil
	}
	o, err := e.Orphans.FindOrphan(key)
	if err != nil {
		return false, cniError(types.ErrTryAgainLater, "DEL %s: no record, and the primary's record of it could not be read: %w", key, err)
	}
	if o == nil {
		return false, nil
	}
	if o.Record == nil || o.Record.Key != key {
		return true, cniError(types.ErrInternal, "DEL %s: adopted from %s: not a record of this attachment", key, o.Source)
	}
	e.log().Warn("DEL found no record: adopting and tearing down the attachment the primary made",
		"attachment", key.String(), "source", o.Source, "delegates", len(o.Record.Steps))
	traceOf(ctx).adopted(o.Source)
	if err := e.teardown(ctx, req.Conf, o.Record, req.Args, byRuntime); err != nil {
		return true, cniErrorCode(types.ErrTryAgainLater, "DEL %s: adopted from %s: %w; still held and recorded, retry DEL", key, o.Source, err)
	}
	if o.Settle != nil {
		if err := o.Settle(); err != nil {
			// Torn down: the DEL succeeded. libcni removes the entry
			// itself right after; only an adoption pass in between could
			// bring back a record, which a later GC or DEL clears.
			e.log().Warn("adopted attachment torn down, but its source could not be removed",
				"attachment", key.String(), "source", o.Source, "error", err)
		}
	}
	return true, nil
}
