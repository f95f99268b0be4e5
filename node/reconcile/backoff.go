package reconcile

import (
	"time"

	"github.com/catena-cni/catena/cache"
)

// Backoff decides when the teardown of a record that needs it is retried
// next: per record, capped exponential.
type Backoff interface {
	// Due reports whether key may be retried at now.
	Due(key cache.Key, now time.Time) bool
	// Failed notes a failed retry at now: the next waits longer.
	Failed(key cache.Key, now time.Time)
	// Forget drops key's state (its teardown succeeded, or it is gone).
	Forget(key cache.Key)
}

// DueTimer is an optional Backoff capability: when a record became, or
// becomes, due; the zero time for one due since forever. A pass retries
// the records that are due oldest due first.
type DueTimer interface {
	DueAt(key cache.Key) time.Time
}
