package libchain

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
)

func TestRetryBackoff(t *testing.T) {
	tests := []struct {
		failed int
		want   time.Duration
	}{
		{-1, 0}, {0, 0}, {1, 0},
		{2, time.Second}, {3, 2 * time.Second}, {4, 4 * time.Second},
		{10, 256 * time.Second}, {11, 5 * time.Minute}, {12, 5 * time.Minute}, {1 << 30, 5 * time.Minute},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, retryBackoff(tc.failed), "after %d failed attempts", tc.failed)
	}
}

// stuckExec fails the DEL of the containers in stuck; a DEL of "hung"
// first takes delegateTimeout of the fake clock, as a DEL that hangs until
// it is killed does.
type stuckExec struct {
	*fakeExec
	clock   *clock
	timeout time.Duration
	stuck   map[string]bool
}

func (s *stuckExec) Run(ctx context.Context, c Call) error {
	if err := s.fakeExec.Run(ctx, c); err != nil || c.Verb != "DEL" || !s.stuck[c.Args.ContainerID] {
		return err
	}
	if c.Args.ContainerID == "hung" {
		s.clock.advance(s.timeout)
	}
	return types.NewError(types.ErrInternal, c.Args.ContainerID+" DEL failed on purpose", "")
}

// TestHungTeardownBacksOff: a record whose DEL hangs and a newer one whose
// DEL failed but now works. Over a minute of ADDs, one every 100 ms, the
// hung record is attempted at most once per backoff period (the gaps
// between its attempts double), and the newer record is torn down at once.
func TestHungTeardownBacksOff(t *testing.T) {
	c := newClock()
	exec := &stuckExec{fakeExec: newFakeExec(), clock: c, timeout: 200 * time.Millisecond,
		stuck: map[string]bool{"hung": true, "fixable": true}}
	store := cache.NewDiskStore(afero.NewMemMapFs(), "/var/lib/cni/catena", cache.NewMemLocker())
	eng := &Engine{Store: store, Exec: exec, Now: c.now}
	conf := chainConf(t, "1.1.0", dIPAM, dPort)
	ctx := context.Background()
	for _, cid := range []string{"hung", "fixable"} {
		_, err := eng.Add(ctx, req(conf, cid))
		require.NoError(t, err)
	}
	for _, cid := range []string{"hung", "fixable"} {
		require.Error(t, eng.Del(ctx, req(conf, cid)))
		c.advance(time.Millisecond)
	}
	delete(exec.stuck, "fixable")

	var hungAt []time.Time
	fixedAfter := -1
	for i := range 600 {
		exec.reset()
		start := c.now()
		_, err := eng.Add(ctx, req(conf, fmt.Sprintf("c%d", i)))
		require.NoError(t, err)
		for _, d := range exec.callsOf("DEL", "portmap") {
			switch d.ContainerID {
			case "hung":
				hungAt = append(hungAt, start)
			case "fixable":
				fixedAfter = i
			}
		}
		c.advance(100 * time.Millisecond)
	}
	assert.LessOrEqual(t, fixedAfter, 1, "the newer record is retried by the first ADDs, whatever the hung one does")
	assert.GreaterOrEqual(t, fixedAfter, 0, "the newer record was retried")
	_, err := store.Load(keyOf(conf, "fixable"))
	require.ErrorIs(t, err, cache.ErrNotFound)

	require.NotEmpty(t, hungAt)
	t.Logf("the hung record was attempted by %d of 600 ADDs, at %v", len(hungAt), hungAt)
	for i := 1; i < len(hungAt); i++ {
		// Before attempt i, the record has 1 (its DEL) + i failed attempts.
		gap := hungAt[i].Sub(hungAt[i-1])
		assert.GreaterOrEqual(t, gap, retryBackoff(1+i), "attempt %d came %s after the previous one", i, gap)
	}
	assert.LessOrEqual(t, len(hungAt), 7, "a minute holds at most 1+1+2+4+8+16+32 s of backoff")
	rec, err := store.Load(keyOf(conf, "hung"))
	require.NoError(t, err)
	assert.Equal(t, 1+len(hungAt), rec.TeardownAttempts)
}
