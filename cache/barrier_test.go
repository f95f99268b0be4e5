package cache

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBarrier(t *testing.T) {
	lockers := map[string]func(t *testing.T) Barrier{
		"flock": func(t *testing.T) Barrier { return NewFlockLocker(filepath.Join(t.TempDir(), LocksDir)) },
		"mem":   func(t *testing.T) Barrier { return NewMemLocker() },
	}
	for name, mk := range lockers {
		t.Run(name, func(t *testing.T) {
			b := mk(t)
			ctx := context.Background()
			short := func() context.Context {
				c, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
				t.Cleanup(cancel)
				return c
			}
			a1, err := b.Barrier(ctx, "podnet", false)
			require.NoError(t, err)
			a2, err := b.Barrier(short(), "podnet", false)
			require.NoError(t, err, "ADDs share the barrier")
			_, err = b.Barrier(short(), "podnet", true)
			require.ErrorIs(t, err, ErrLocked, "GC waits for the ADDs")
			assert.Contains(t, err.Error(), "network podnet is held by an ADD")
			other, err := b.Barrier(short(), "othernet", true)
			require.NoError(t, err, "another network is not held")
			require.NoError(t, other.Unlock())
			require.NoError(t, a1.Unlock())
			require.NoError(t, a2.Unlock())
			require.Error(t, a2.Unlock(), "a second unlock is an error")

			gc, err := b.Barrier(short(), "podnet", true)
			require.NoError(t, err)
			_, err = b.Barrier(short(), "podnet", false)
			require.ErrorIs(t, err, ErrLocked, "an ADD waits for GC")
			assert.Contains(t, err.Error(), "held by a GC")
			got := make(chan error, 1)
			go func() {
				u, err := b.Barrier(ctx, "podnet", false)
				if err == nil {
					err = u.Unlock()
				}
				got <- err
			}()
			time.Sleep(20 * time.Millisecond)
			require.NoError(t, gc.Unlock())
			select {
			case err := <-got:
				require.NoError(t, err, "the ADD goes on once GC releases")
			case <-time.After(5 * time.Second):
				t.Fatal("the ADD was not let through after GC released")
			}
			_, err = b.Barrier(ctx, "bad/net", false)
			require.Error(t, err)
		})
	}
}

// TestBarrierFileIsTrusted: the barrier's file is created 0600 one level
// below the network dirs, and a symlink planted at its name is never
// followed.
func TestBarrierFileIsTrusted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), LocksDir)
	l := NewFlockLocker(dir)
	u, err := l.Barrier(context.Background(), "podnet", false)
	require.NoError(t, err)
	require.NoError(t, u.Unlock())
	fi, err := os.Lstat(filepath.Join(dir, "podnet", barrierName))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode())

	target := filepath.Join(t.TempDir(), "target")
	require.NoError(t, os.WriteFile(target, nil, 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "linknet"), 0o700))
	require.NoError(t, os.Symlink(target, filepath.Join(dir, "linknet", barrierName)))
	_, err = l.Barrier(context.Background(), "linknet", true)
	require.Error(t, err, "a symlink at the barrier's name is refused")
}
