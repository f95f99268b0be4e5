//go:build linux

package cache

import (
	"context"
	"errors"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockers returns a fresh instance of every Locker, for the shared tests.
func lockers(t *testing.T) map[string]Locker {
	return map[string]Locker{
		"flock":   NewFlockLocker(t.TempDir() + "/locks"),
		"memlock": NewMemLocker(),
	}
}

func forEachLocker(t *testing.T, test func(t *testing.T, l Locker)) {
	for name, l := range lockers(t) {
		t.Run(name, func(t *testing.T) { test(t, l) })
	}
}

func TestLockerTimeoutNamesHolder(t *testing.T) {
	forEachLocker(t, func(t *testing.T, l Locker) {
		key := testKey("abc")
		u, err := l.Lock(t.Context(), key, Holder{Verb: "ADD"})
		require.NoError(t, err)
		t.Cleanup(func() { _ = u.Unlock() })

		start := time.Now() // before the deadline is set, so it is at least 60ms later
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Millisecond)
		defer cancel()
		_, err = l.Lock(ctx, key, Holder{Verb: "DEL"})
		require.ErrorIs(t, err, ErrLocked)
		var le *LockedError
		require.ErrorAs(t, err, &le)
		assert.GreaterOrEqual(t, time.Since(start), 60*time.Millisecond)
		assert.GreaterOrEqual(t, le.Waited, 50*time.Millisecond)
		assert.Equal(t, key, le.Key)
		require.NotNil(t, le.Holder)
		assert.Equal(t, os.Getpid(), le.Holder.PID)
		assert.Equal(t, "ADD", le.Holder.Verb)
		assert.WithinDuration(t, time.Now(), le.Holder.Since, time.Minute)
		assert.Contains(t, err.Error(), "ADD")
		assert.Contains(t, err.Error(), key.String())

		_, err = l.TryLock(key, Holder{Verb: "CHECK"})
		require.ErrorIs(t, err, ErrLocked)
		require.ErrorAs(t, err, &le)
		require.NotNil(t, le.Holder)
		assert.Equal(t, "ADD", le.Holder.Verb)
	})
}

func TestLockerAlreadyDoneContextStillTries(t *testing.T) {
	forEachLocker(t, func(t *testing.T, l Locker) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		u, err := l.Lock(ctx, testKey("abc"), Holder{Verb: "ADD"})
		require.NoError(t, err, "a free lock is taken even with a done context")
		require.NoError(t, u.Unlock())
	})
}

func TestLockerDifferentKeysIndependent(t *testing.T) {
	forEachLocker(t, func(t *testing.T, l Locker) {
		keys := []Key{
			{Network: "n1", ContainerID: "c1", IfName: "eth0"},
			{Network: "n1", ContainerID: "c1", IfName: "eth1"},
			{Network: "n1", ContainerID: "c2", IfName: "eth0"},
			{Network: "n2", ContainerID: "c1", IfName: "eth0"},
		}
		var us []Unlocker
		for _, k := range keys {
			u, err := l.TryLock(k, Holder{Verb: "ADD"})
			require.NoError(t, err, k.String())
			us = append(us, u)
		}
		for _, u := range us {
			require.NoError(t, u.Unlock())
		}
	})
}

func TestLockerReleaseLetsWaiterIn(t *testing.T) {
	forEachLocker(t, func(t *testing.T, l Locker) {
		key := testKey("abc")
		u, err := l.Lock(t.Context(), key, Holder{Verb: "ADD"})
		require.NoError(t, err)
		got := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			u2, err := l.Lock(ctx, key, Holder{Verb: "DEL"})
			if err == nil {
				err = u2.Unlock()
			}
			got <- err
		}()
		time.Sleep(30 * time.Millisecond)
		select {
		case err := <-got:
			t.Fatalf("waiter got in while the lock was held: %v", err)
		default:
		}
		require.NoError(t, u.Unlock())
		select {
		case err := <-got:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("waiter never got the lock")
		}
	})
}

func TestLockerDoubleUnlock(t *testing.T) {
	forEachLocker(t, func(t *testing.T, l Locker) {
		key := testKey("abc")
		u, err := l.TryLock(key, Holder{Verb: "ADD"})
		require.NoError(t, err)
		require.NoError(t, u.Unlock())
		u2, err := l.TryLock(key, Holder{Verb: "DEL"})
		require.NoError(t, err)
		assert.Error(t, u.Unlock(), "a stale unlocker must not release the new holder")
		_, err = l.TryLock(key, Holder{Verb: "CHECK"})
		assert.ErrorIs(t, err, ErrLocked, "the new holder still holds")
		require.NoError(t, u2.Unlock())
	})
}

// TestLockerMutualExclusion hammers one key from many goroutines; with
// FlockLocker this exercises the unlink-on-unlock scheme.
func TestLockerMutualExclusion(t *testing.T) {
	forEachLocker(t, func(t *testing.T, l Locker) {
		key := testKey("abc")
		var inside, entries atomic.Int32
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 50; i++ {
					u, err := l.Lock(context.Background(), key, Holder{Verb: "ADD"})
					if err != nil {
						errs <- err
						return
					}
					if inside.Add(1) != 1 {
						errs <- errors.New("two holders at once")
					}
					entries.Add(1)
					runtime.Gosched()
					inside.Add(-1)
					if err := u.Unlock(); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		assert.Equal(t, int32(8*50), entries.Load())
	})
}
