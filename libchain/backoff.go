package libchain

import (
	"time"

	"github.com/catena-cni/catena/cache"
)

// Retries of a teardown back off per record: after its n-th failed
// teardown attempt a record is next due retryBackoff(n) later. The first
// failure is the runtime's own DEL or rollback, which is an attempt like
// any other: 1 s after it, then doubling, up to 5 min from the 10th
// failure on. A record whose DEL hangs thus costs a retrier one attempt per
// backoff period, and the others, due sooner, get their turn meanwhile.
const (
	retryBackoffBase = time.Second
	retryBackoffCap  = 5 * time.Minute
)

// retryBackoff is how long after its failed-th failed teardown attempt a
// record waits for its next retry.
func retryBackoff(failed int) time.Duration {
	if failed <= 0 {
		return 0
	}
	d := retryBackoffBase
	for i := 1; i < failed; i++ {
		if d >= retryBackoffCap/2 {
			return retryBackoffCap
		}
		d *= 2
	}
	return min(d, retryBackoffCap)
}

// markTeardown notes in the store's teardown index (if it has one) that
// rec needs teardown, next due after the backoff of its failed attempts. A
// hint for the retriers, so a failure is logged, not returned.
func (e *Engine) markTeardown(rec *cache.Record) {
	e.noteTeardown(rec.Key, &cache.PendingNote{
		Due: e.now().Add(retryBackoff(rec.TeardownAttempts)), Attempts: rec.TeardownAttempts,
	})
}

// noteTeardown keeps the store's teardown index (if it has one) in step:
// it writes note, or with nil clears the key's note. A failure is logged,
// not returned: the index is a hint.
func (e *Engine) noteTeardown(key cache.Key, note *cache.PendingNote) {
	ti, ok := e.Store.(cache.TeardownIndex)
	if !ok {
		return
	}
	var err error
	if note != nil {
		err = ti.NotePending(key, *note)
	} else {
		err = ti.ClearPending(key)
	}
	if err != nil {
		e.log().Warn("updating the teardown index", "attachment", key.String(), "error", err)
	}
}
