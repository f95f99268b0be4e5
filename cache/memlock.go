package cache

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"
)

// MemLocker is an in-process Locker with the semantics of FlockLocker
// (per-attachment locks, waits bounded by ctx, a *LockedError naming the
// holder). It is meant for tests of the engine on afero.MemMapFs; it does
// not lock across processes.
type MemLocker struct {
	mu       sync.Mutex
	held     map[Key]*memLock
	barriers map[string]*memBarrier // barrier.go
}

var _ Locker = (*MemLocker)(nil)

type memLock struct {
	who      Holder
	released chan struct{} // closed on Unlock
}

// NewMemLocker returns an empty in-process locker.
func NewMemLocker() *MemLocker {
	return &MemLocker{held: make(map[Key]*memLock)}
}

// Lock waits until key is free or ctx is done.
func (l *MemLocker) Lock(ctx context.Context, key Key, who Holder) (Unlocker, error) {
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("lock attachment: %w", err)
	}
	start := time.Now()
	for {
		u, cur := l.take(key, who)
		if u != nil {
			return u, nil
		}
		select {
		case <-cur.released:
		case <-ctx.Done():
			h := cur.who
			return nil, &LockedError{Key: key, Holder: &h, Waited: time.Since(start)}
		}
	}
}

// TryLock takes key's lock if it is free.
func (l *MemLocker) TryLock(key Key, who Holder) (Unlocker, error) {
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("lock attachment: %w", err)
	}
	u, cur := l.take(key, who)
	if u != nil {
		return u, nil
	}
	h := cur.who
	return nil, &LockedError{Key: key, Holder: &h}
}

// take returns an unlocker if key was free, or the current lock.
func (l *MemLocker) take(key Key, who Holder) (*memUnlocker, *memLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = make(map[Key]*memLock)
	}
	if cur, ok := l.held[key]; ok {
		return nil, cur
	}
	ml := &memLock{who: fillHolder(who), released: make(chan struct{})}
	l.held[key] = ml
	return &memUnlocker{l: l, key: key, lock: ml}, nil
}

type memUnlocker struct {
	l    *MemLocker
	key  Key
	lock *memLock
	once sync.Once
}

// Unlock releases the lock; a second Unlock is an error and does nothing.
func (u *memUnlocker) Unlock() error {
	released := false
	u.once.Do(func() {
		u.l.mu.Lock()
		defer u.l.mu.Unlock()
		delete(u.l.held, u.key)
		close(u.lock.released)
		released = true
	})
	if !released {
		return fmt.Errorf("unlock attachment %s: already unlocked", u.key)
	}
	return nil
}

// fillHolder defaults the holder's PID to this process and Since to now.
func fillHolder(who Holder) Holder {
	if who.PID == 0 {
		who.PID = os.Getpid()
	}
	if who.Since.IsZero() {
		who.Since = time.Now().UTC()
	}
	return who
}
