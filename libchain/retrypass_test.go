package libchain

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/internal/testclock"
)

// newSyncClock is a fake clock safe for the retry pass's workers.
func newSyncClock() *testclock.Clock { return testclock.New(newClock().t) }

// stuckExec fails the DEL of the containers in stuck, the way a DEL that
// hangs until it is killed or that fails outright does.
type stuckExec struct {
	*fakeExec
	mu    sync.Mutex
	stuck map[string]bool
}

func newStuckExec(stuck ...string) *stuckExec {
	s := &stuckExec{fakeExec: newFakeExec(), stuck: map[string]bool{}}
	for _, cid := range stuck {
		s.stuck[cid] = true
	}
	return s
}

func (s *stuckExec) setStuck(cid string, v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stuck[cid] = v
}

func (s *stuckExec) Run(ctx context.Context, c Call) error {
	if err := s.fakeExec.Run(ctx, c); err != nil || c.Verb != "DEL" {
		return err
	}
	s.mu.Lock()
	stuck := s.stuck[c.Args.ContainerID]
	s.mu.Unlock()
	if stuck {
		return types.NewError(types.ErrInternal, c.Args.ContainerID+" DEL failed on purpose", "")
	}
	return nil
}

// countKicker counts the kicks.
type countKicker struct{ n int }

func (k *countKicker) Kick(Request) error { k.n++; return nil }

// pendingWorld is an engine over an in-memory store with n attachments
// whose DEL failed and keeps failing ("hung0"...), all pending.
func pendingWorld(t *testing.T, n int) (*Engine, *stuckExec, *testclock.Clock, *NetConf) {
	t.Helper()
	c := newSyncClock()
	exec := newStuckExec()
	store := cache.NewDiskStore(afero.NewMemMapFs(), "/var/lib/cni/catena", cache.NewMemLocker())
	eng := &Engine{Store: store, Exec: exec, Now: c.Now}
	conf := chainConf(t, "1.1.0", dIPAM, dPort)
	for i := range n {
		cid := fmt.Sprintf("hung%d", i)
		exec.setStuck(cid, true)
		_, err := eng.Add(t.Context(), req(conf, cid))
		require.NoError(t, err)
		require.Error(t, eng.Del(t.Context(), req(conf, cid)))
		c.Advance(time.Millisecond)
	}
	return eng, exec, c, conf
}

// TestNoADDRunsAForeignTeardown: with 0, 1, 10 and 100 pending teardowns
// on its network, all due and all failing, an ADD runs its own delegates'
// ADDs and nothing else; KickRetry then asks the retrier for a pass, once,
// only if something is pending.
func TestNoADDRunsAForeignTeardown(t *testing.T) {
	for _, n := range []int{0, 1, 10, 100} {
		t.Run(fmt.Sprintf("%d pending", n), func(t *testing.T) {
			eng, exec, c, conf := pendingWorld(t, n)
			kicks := &countKicker{}
			eng.Retrier = kicks
			c.Advance(time.Hour) // everything due
			for i := range 5 {
				exec.reset()
				r := req(conf, fmt.Sprintf("new%d", i))
				_, err := eng.Add(t.Context(), r)
				require.NoError(t, err)
				assert.Equal(t, []string{"ADD ipam", "ADD portmap"}, exec.seen(), "ADD %d", i)
				eng.KickRetry(r)
			}
			if n == 0 {
				assert.Zero(t, kicks.n, "nothing pending: no retrier")
			} else {
				assert.Equal(t, 5, kicks.n, "a pass is due after each call (the in-memory fs keeps no stamp)")
			}
			for i := range n {
				rec, err := eng.Store.Load(keyOf(conf, fmt.Sprintf("hung%d", i)))
				require.NoError(t, err)
				assert.Equal(t, 1, rec.TeardownAttempts, "only the runtime's DEL ran")
			}
		})
	}
}

// TestFailedDELIsTheFirstAttempt: the runtime's failed DEL is the first
// teardown attempt; the record is next due one backoff period later, not
// at once.
func TestFailedDELIsTheFirstAttempt(t *testing.T) {
	eng, _, c, conf := pendingWorld(t, 1)
	pending, err := eng.Store.(cache.TeardownIndex).PendingTeardown(conf.Name, 10)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	assert.Equal(t, cache.PendingNote{Due: c.Now().Add(-time.Millisecond).Add(time.Second), Attempts: 1}, pending[0].Note)

	rep, err := eng.RetryPending(t.Context(), gcReq(conf), RetryOptions{Linger: -1})
	require.NoError(t, err)
	assert.Zero(t, rep.Attempted, "not due yet: %+v", rep)
}

// TestRetryPassIsFairToTheFixable: 100 records whose DEL keeps failing and,
// newest of all, one whose DEL failed once and then works. A pass takes
// them oldest-due first within its bound of attempts: with the default
// bound the fixable one is released in the first pass after its backoff;
// with a bound of 10 attempts a pass, each record gets its turn within
// ceil(101/10) passes, because an attempted record is pushed behind the
// others by its backoff. The failing ones are attempted at most once per
// backoff period.
func TestRetryPassIsFairToTheFixable(t *testing.T) {
	for _, tc := range []struct {
		name       string
		max        int
		wantPasses int
	}{
		{"default bound", 0, 1},
		{"10 attempts a pass", 10, 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng, exec, c, conf := pendingWorld(t, 100)
			exec.setStuck("fixable", true)
			_, err := eng.Add(t.Context(), req(conf, "fixable"))
			require.NoError(t, err)
			require.Error(t, eng.Del(t.Context(), req(conf, "fixable")))
			exec.setStuck("fixable", false)
			c.Advance(retryBackoff(1))

			attempts := map[string][]time.Time{}
			passes := 0
			for passes < 20 {
				exec.reset()
				passes++
				at := c.Now()
				rep, err := eng.RetryPending(t.Context(), gcReq(conf), RetryOptions{MaxAttempts: tc.max, Linger: -1})
				require.NoError(t, err)
				if tc.max > 0 {
					assert.LessOrEqual(t, rep.Attempted, tc.max, "pass %d", passes)
				}
				for _, d := range exec.callsOf("DEL", "portmap") {
					attempts[d.ContainerID] = append(attempts[d.ContainerID], at)
				}
				if rep.Released > 0 {
					break
				}
				c.Advance(100 * time.Millisecond)
			}
			_, err = eng.Store.Load(keyOf(conf, "fixable"))
			require.ErrorIs(t, err, cache.ErrNotFound, "the fixable record was released")
			assert.LessOrEqual(t, passes, tc.wantPasses, "passes until the fixable record was released")
			t.Logf("fixable released in pass %d; %d records attempted", passes, len(attempts))
			for cid, at := range attempts {
				for i := 1; i < len(at); i++ {
					// Before attempt i, the record has 1 (its DEL) + i failed attempts.
					assert.GreaterOrEqual(t, at[i].Sub(at[i-1]), retryBackoff(i), "%s attempt %d", cid, i)
				}
			}
		})
	}
}

// TestRetryPassBacksOffAHungRecord: over a minute of passes, one every
// 100 ms, a record whose DEL never succeeds is attempted once per backoff
// period (1, 2, 4, 8, 16 s...), and its attempts are counted in its record.
func TestRetryPassBacksOffAHungRecord(t *testing.T) {
	eng, exec, c, conf := pendingWorld(t, 1)
	var at []time.Time
	for range 600 {
		exec.reset()
		start := c.Now()
		_, err := eng.RetryPending(t.Context(), gcReq(conf), RetryOptions{Linger: -1})
		require.NoError(t, err)
		if len(exec.callsOf("DEL", "portmap")) > 0 {
			at = append(at, start)
		}
		c.Advance(100 * time.Millisecond)
	}
	t.Logf("the hung record was attempted by %d of 600 passes", len(at))
	require.NotEmpty(t, at)
	for i := 1; i < len(at); i++ {
		assert.GreaterOrEqual(t, at[i].Sub(at[i-1]), retryBackoff(1+i), "attempt %d", i)
	}
	assert.LessOrEqual(t, len(at), 6, "a minute holds at most 1+2+4+8+16 s of backoff before the sixth")
	rec, err := eng.Store.Load(keyOf(conf, "hung0"))
	require.NoError(t, err)
	assert.Equal(t, 1+len(at), rec.TeardownAttempts)
}

// TestRetryPassLingers: a run passes again while the next due is within
// Linger, sleeping until it, and stops at its budget.
func TestRetryPassLingers(t *testing.T) {
	eng, exec, c, conf := pendingWorld(t, 1)
	exec.reset()
	var slept []time.Duration
	opts := RetryOptions{Linger: 5 * time.Second, Budget: 20 * time.Second, Sleep: func(_ context.Context, d time.Duration) {
		slept = append(slept, d)
		c.Advance(d)
	}}
	rep, err := eng.RetryPending(t.Context(), gcReq(conf), opts)
	require.NoError(t, err)
	// Due 1 s after the DEL; attempts then push it 2 and 4 s out; the
	// next, 8 s, is past Linger.
	assert.Equal(t, 3, rep.Attempted, "%+v, slept %v", rep, slept)
	assert.Equal(t, 3, rep.Failed)
	assert.Len(t, exec.callsOf("DEL", "portmap"), 3)

	exec.setStuck("hung0", false)
	c.Advance(time.Hour)
	rep, err = eng.RetryPending(t.Context(), gcReq(conf), opts)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Released)
	assert.True(t, rep.Next.IsZero(), "nothing left: %v", rep.Next)
}
