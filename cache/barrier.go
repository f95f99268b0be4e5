package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Barrier orders GC against ADD on one network: an ADD holds its network's
// barrier shared until its record is first written (before its first
// delegate gets its request), a GC holds it exclusive, once per delegate,
// while it lists the records it tells that delegate are valid and forwards
// GC to it. So an ADD is in that listing or reaches that delegate only
// after its GC: each delegate's valid list holds every attachment whose
// ADD reached it. ADDs do not wait for one another, and a waiting GC does
// not hold back new ADDs (it may then time out: a GC is retried by the
// runtime's next pass, a pod creation is not).
//
// It is an optional capability of a Store (or of the Locker a DiskStore
// embeds); without it GC and ADD are not ordered.
type Barrier interface {
	// Barrier waits until network's barrier can be held, shared or
	// exclusive, or ctx is done; it then returns an error wrapping
	// ErrLocked.
	Barrier(ctx context.Context, network string, exclusive bool) (Unlocker, error)
}

var (
	_ Barrier = (*DiskStore)(nil)
	_ Barrier = (*MemLocker)(nil)
)

// Barrier implements Barrier with the store's Locker, if it has one; else
// nothing is held.
func (s *DiskStore) Barrier(ctx context.Context, network string, exclusive bool) (Unlocker, error) {
	if b, ok := s.Locker.(Barrier); ok {
		return b.Barrier(ctx, network, exclusive)
	}
	return nopUnlocker{}, nil
}

type nopUnlocker struct{}

func (nopUnlocker) Unlock() error { return nil }

// barrierTimeout is the error of a barrier not taken in time.
func barrierTimeout(network string, exclusive bool, waited time.Duration) error {
	held := "a GC"
	if exclusive {
		held = "an ADD"
	}
	return fmt.Errorf("network %s is held by %s (waited %s): %w", network, held, waited.Round(time.Millisecond), ErrLocked)
}

// memBarrier is one network's barrier of a MemLocker: readers count the
// shared holders, -1 is the exclusive one; changed is closed (and
// replaced) on every release.
type memBarrier struct {
	readers int
	changed chan struct{}
}

// Barrier implements Barrier in process.
func (l *MemLocker) Barrier(ctx context.Context, network string, exclusive bool) (Unlocker, error) {
	if err := validNetwork(network); err != nil {
		return nil, fmt.Errorf("network barrier: %w", err)
	}
	start := time.Now()
	for {
		u, wait := l.takeBarrier(network, exclusive)
		if u != nil {
			return u, nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, barrierTimeout(network, exclusive, time.Since(start))
		}
	}
}

// takeBarrier returns an unlocker, or what to wait on.
func (l *MemLocker) takeBarrier(network string, exclusive bool) (Unlocker, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.barriers == nil {
		l.barriers = make(map[string]*memBarrier)
	}
	b := l.barriers[network]
	if b == nil {
		b = &memBarrier{changed: make(chan struct{})}
		l.barriers[network] = b
	}
	switch {
	case exclusive && b.readers == 0:
		b.readers = -1
	case !exclusive && b.readers >= 0:
		b.readers++
	default:
		return nil, b.changed
	}
	return onceUnlocker("network barrier "+network, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if b.readers < 0 {
			b.readers = 0
		} else {
			b.readers--
		}
		close(b.changed)
		b.changed = make(chan struct{})
		return nil
	}), nil
}

// onceUnlocker returns an Unlocker that runs release once; a second Unlock
// is an error and does nothing.
func onceUnlocker(what string, release func() error) Unlocker {
	var once sync.Once
	return unlockFunc(func() error {
		err := errors.New("unlock " + what + ": already unlocked")
		once.Do(func() { err = release() })
		return err
	})
}

type unlockFunc func() error

func (f unlockFunc) Unlock() error { return f() }
