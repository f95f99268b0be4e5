package nodeconf

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeObserver records what the contest reports.
type fakeObserver struct {
	mu      sync.Mutex
	writes  int
	undone  map[string]int
	backoff []time.Duration
}

var _ ConflistObserver = (*fakeObserver)(nil)

func (o *fakeObserver) ConflistWritten() { o.mu.Lock(); o.writes++; o.mu.Unlock() }
func (o *fakeObserver) ConflistTaken(by string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.undone == nil {
		o.undone = map[string]int{}
	}
	o.undone[by]++
}
func (o *fakeObserver) ConflistBackoff(d time.Duration) {
	o.mu.Lock()
	o.backoff = append(o.backoff, d)
	o.mu.Unlock()
}

const ciliumCL = `{"cniVersion":"0.3.1","name":"cilium","plugins":[{"type":"cilium-cni"}]}`

// TestContest drives the contest with a fake clock as Watch does (seen
// before each pass, the pass held while hold says so): who took the file,
// how long each rewrite waits, what readiness says, and when it ends.
func TestContest(t *testing.T) {
	own := filepath.Join(confDir, ownName)
	renameAway := func(t *testing.T, fsys afero.Fs) { require.NoError(t, fsys.Rename(own, own+CiliumBackup)) }
	remove := func(t *testing.T, fsys afero.Fs) { require.NoError(t, fsys.Remove(own)) }
	for _, tc := range []struct {
		name    string
		files   map[string]string
		take    func(t *testing.T, fsys afero.Fs)
		by      string
		steps   []time.Duration // the step after each take
		reason  string
		current string        // in Current's error (the status's reason, then the disk's)
		cap     time.Duration // Config.RewriteBackoff
	}{
		{name: "cilium exclusive: straight to the cap", files: map[string]string{"05-cilium.conflist": ciliumCL},
			take: renameAway, by: TakenByCilium, steps: []time.Duration{DefaultRewriteBackoff, DefaultRewriteBackoff, DefaultRewriteBackoff},
			reason: "by Cilium's exclusive mode", current: "set cni.exclusive: false"},
		{name: "cilium exclusive, a 10 s cap", files: map[string]string{"05-cilium.conflist": ciliumCL}, cap: 10 * time.Second,
			take: renameAway, by: TakenByCilium, steps: []time.Duration{10 * time.Second, 10 * time.Second},
			reason: "by Cilium's exclusive mode", current: "set cni.exclusive: false"},
		{name: "renamed twice, a 5 s cap", files: map[string]string{"10-a.conflist": bridgeCL}, cap: 5 * time.Second,
			take: renameAway, by: TakenByOther, steps: []time.Duration{contestMin, 5 * time.Second},
			reason: "removed or changed by another writer", current: "stop that writer"},
		{name: "cilium-cni under another name", files: map[string]string{"10-cilium-chain.conflist": ciliumCL},
			take: renameAway, by: TakenByCilium, steps: []time.Duration{DefaultRewriteBackoff, DefaultRewriteBackoff},
			reason: "10-cilium-chain.conflist is in the conf dir", current: "in Cilium's chaining mode too"},
		{name: "renamed, no Cilium config", files: map[string]string{"10-a.conflist": bridgeCL},
			take: renameAway, by: TakenByOther, steps: []time.Duration{contestMin, DefaultRewriteBackoff, DefaultRewriteBackoff},
			reason: "removed or changed by another writer", current: "stop that writer"},
		{name: "removed beside Cilium's config", files: map[string]string{"05-cilium.conflist": ciliumCL},
			take: remove, by: TakenByOther, steps: []time.Duration{contestMin, DefaultRewriteBackoff},
			reason: "another writer", current: "stop that writer"},
		{name: "changed", files: map[string]string{"10-a.conflist": bridgeCL},
			take: func(t *testing.T, fsys afero.Fs) { require.NoError(t, afero.WriteFile(fsys, own, []byte(`{}`), 0o644)) },
			by:   TakenByOther, steps: []time.Duration{contestMin, DefaultRewriteBackoff},
			reason: "another writer", current: "stop that writer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i, logs := newTestInstaller(t, tc.files)
			i.Cfg.RewriteBackoff = tc.cap
			obs := &fakeObserver{}
			i.Observer = obs
			now := time.Unix(1_000_000, 0)
			c := contest{i: i, now: func() time.Time { return now }}
			pass := func() (Status, error) {
				c.seen()
				st, err := i.syncHeld(context.Background(), c.hold())
				c.observe(st, err)
				return st, err
			}
			st, err := pass()
			require.NoError(t, err)
			require.True(t, st.Wrote)
			for n, step := range tc.steps {
				now = now.Add(5 * time.Millisecond)
				tc.take(t, i.Fs)
				c.seen() // the event
				assert.Equal(t, step, c.step, "after take %d", n+1)
				assert.False(t, i.Status().Ready)
				assert.Contains(t, i.Status().Reason, tc.reason)
				require.Error(t, i.Current())
				assert.Contains(t, i.Current().Error(), tc.current)
				assert.Equal(t, step-5*time.Millisecond, c.due())

				now = now.Add(step - 10*time.Millisecond) // just before the step: held
				st, err := pass()
				require.Error(t, err)
				assert.True(t, isHeld(err))
				assert.False(t, st.Wrote)
				assert.Contains(t, st.Reason, "at most once every "+step.String())
				assert.NotContains(t, string(generatedFile(t, i)), GeneratedKey, "nothing written while held")

				now = now.Add(10 * time.Millisecond)
				st, err = pass()
				require.NoError(t, err)
				assert.True(t, st.Wrote, "rewritten once the step passed")
				require.NoError(t, i.Current())
			}
			assert.Equal(t, len(tc.steps)+1, obs.writes)
			assert.Equal(t, map[string]int{tc.by: len(tc.steps)}, obs.undone)
			assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), "one warning per contest:\n%s", logs)
			assert.Contains(t, logs.String(), "by="+tc.by)

			// In place through a pass after twice the step: the contest ends.
			now = now.Add(2*c.step + time.Millisecond)
			_, err = pass()
			require.NoError(t, err)
			assert.Zero(t, c.step)
			assert.Contains(t, logs.String(), "backoff ended")
			assert.Equal(t, time.Duration(0), obs.backoff[len(obs.backoff)-1])
			assert.Equal(t, len(tc.steps)+1, obs.writes)
		})
	}
}

// TestContestNothingTaken: the agent's own rewrites (the primary changed)
// and a file never written are no contest.
func TestContestNothingTaken(t *testing.T) {
	i, logs := newTestInstaller(t, map[string]string{"10-a.conflist": bridgeCL})
	obs := &fakeObserver{}
	i.Observer = obs
	c := contest{i: i, now: time.Now}
	c.seen()
	st, err := i.syncHeld(context.Background(), c.hold())
	require.NoError(t, err)
	c.observe(st, err)
	require.NoError(t, afero.WriteFile(i.Fs, filepath.Join(confDir, "10-a.conflist"), []byte(bridgeCL+" "), 0o644))
	c.seen()
	st, err = i.syncHeld(context.Background(), c.hold())
	require.NoError(t, err)
	assert.True(t, st.Wrote, "the primary changed")
	c.observe(st, err)
	c.seen()
	assert.Zero(t, c.step)
	assert.Nil(t, obs.undone)
	assert.Equal(t, 2, obs.writes)
	assert.NotContains(t, logs.String(), "taken away")
}
