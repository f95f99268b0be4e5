package reconcile

import (
	"sync"
	"time"

	"github.com/catena-cni/catena/cache"
)

// Default bounds of MemBackoff.
const (
	DefaultBackoffMin = 5 * time.Second
	DefaultBackoffMax = 5 * time.Minute
)

// MemBackoff is the tests' Backoff: the first retry of a record is due at
// once, then after Min, doubling up to Max, in memory. The agent uses
// IndexBackoff, the pending markers' durable schedule.
type MemBackoff struct {
	Min, Max time.Duration

	mu    sync.Mutex
	state map[cache.Key]backoffState
}

var _ Backoff = (*MemBackoff)(nil)

type backoffState struct {
	next  time.Time
	delay time.Duration
}

// Due implements Backoff.
func (b *MemBackoff) Due(key cache.Key, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	st, ok := b.state[key]
	return !ok || !now.Before(st.next)
}

// Failed implements Backoff.
func (b *MemBackoff) Failed(key cache.Key, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = DefaultBackoffMin
	}
	if hi < lo {
		hi = max(lo, DefaultBackoffMax)
	}
	if b.state == nil {
		b.state = map[cache.Key]backoffState{}
	}
	st, ok := b.state[key]
	switch {
	case !ok:
		st.delay = lo
	default:
		st.delay = min(2*st.delay, hi)
	}
	st.next = now.Add(st.delay)
	b.state[key] = st
}

// Forget implements Backoff.
func (b *MemBackoff) Forget(key cache.Key) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.state, key)
}

// Len is how many records are backing off.
func (b *MemBackoff) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.state)
}
