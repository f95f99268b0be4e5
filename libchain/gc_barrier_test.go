package libchain

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
)

// orderExec is a fakeExec that keeps the order of every call as
// "VERB type containerID" and runs onGC, with the call's context, before a
// GC of a delegate type reaches the fake.
type orderExec struct {
	*fakeExec
	mu    sync.Mutex
	order []string
	onGC  func(ctx context.Context, typ string)
	onDel func()
}

var _ Executor = (*orderExec)(nil)

func (o *orderExec) note(c Call) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.order = append(o.order, c.Verb+" "+c.Type+" "+c.Args.ContainerID)
}

func (o *orderExec) Add(ctx context.Context, c Call) (types.Result, error) {
	res, err := o.fakeExec.Add(ctx, c)
	o.note(c)
	return res, err
}

func (o *orderExec) Run(ctx context.Context, c Call) error {
	if c.Verb == "GC" && o.onGC != nil {
		o.onGC(ctx, c.Type)
	}
	if c.Verb == "DEL" && o.onDel != nil {
		o.onDel()
	}
	o.note(c)
	err := o.fakeExec.Run(ctx, c)
	if ctx.Err() != nil {
		return fmt.Errorf("killed: %w", ctx.Err()) // as the executor reports a delegate it killed
	}
	return err
}

func (o *orderExec) index(s string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Index(o.order, s)
}

// validOf returns the containerIDs of the valid list a GC call carried.
func validOf(c call) []string {
	var ids []string
	list, _ := c.Config["cni.dev/valid-attachments"].([]any)
	for _, a := range list {
		m, _ := a.(map[string]any)
		id, _ := m["containerID"].(string)
		ids = append(ids, id)
	}
	return ids
}

// barrierEngine returns an engine on store with a 1.1.0 chain [ipam,
// portmap], a lockTimeout of 5 s, and an attachment cid added an hour
// before its clock's time.
func barrierEngine(t *testing.T, store cache.Store, cid string) (*Engine, *orderExec, *NetConf) {
	t.Helper()
	exec := &orderExec{fakeExec: newFakeExec()}
	c := newClock()
	eng := &Engine{Store: store, Exec: exec, Now: c.now}
	conf := chainConf(t, "1.1.0", dIPAM, dPort)
	conf.LockTimeout = 5 * time.Second
	// The store may be the real disk: its fsyncs missed the fakes' 200 ms
	// bound on a loaded machine (CI of 2026-11-25), and nothing here
	// times a delegate out.
	conf.DelegateTimeout = 10 * time.Second
	_, err := eng.Add(context.Background(), req(conf, cid))
	require.NoError(t, err)
	c.advance(time.Hour)
	return eng, exec, conf
}

// TestGCNeverOmitsAnADDThatPassedTheDelegate starts an ADD between the
// forwards of GC to the first and the second delegate (an operator's
// catenactl gc --valid runs outside any runtime's ordering). Whatever the
// interleaving, a delegate whose ADD of the new attachment came before its
// GC must find it in its valid list: else a delegate with a real GC frees
// a live pod's IP.
func TestGCNeverOmitsAnADDThatPassedTheDelegate(t *testing.T) {
	eng, exec, conf := barrierEngine(t, cache.NewDiskStore(afero.NewMemMapFs(), "/cache", cache.NewMemLocker()), "old")

	var once sync.Once
	addDone := make(chan error, 1)
	exec.onGC = func(_ context.Context, typ string) {
		if typ != "ipam" {
			return
		}
		once.Do(func() {
			go func() {
				_, err := eng.Add(context.Background(), req(conf, "newpod"))
				addDone <- err
			}()
			// Give the ADD the time to run through both delegates, if
			// nothing holds it back.
			deadline := time.Now().Add(300 * time.Millisecond)
			for time.Now().Before(deadline) && exec.index("ADD portmap newpod") < 0 {
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	_, err := eng.CollectGarbage(context.Background(), gcReq(conf), GCOptions{Valid: []Attachment{{ContainerID: "old", IfName: "eth0"}}})
	require.NoError(t, err)
	require.NoError(t, <-addDone, "the ADD must succeed once GC is done")

	for _, typ := range []string{"ipam", "portmap"} {
		gcs := exec.callsOf("GC", typ)
		require.Len(t, gcs, 1)
		addAt, gcAt := exec.index("ADD "+typ+" newpod"), exec.index("GC "+typ+" ")
		require.GreaterOrEqual(t, addAt, 0)
		if addAt < gcAt {
			assert.Contains(t, validOf(gcs[0]), "newpod",
				fmt.Sprintf("GC of %s came after newpod's ADD passed it (calls %v)", typ, exec.order))
		}
	}
}

// barrierWaits is a store whose barrier notes when each shared request
// (an ADD's) was made and how long it waited: what an ADD waits for a GC,
// apart from its own writes and the machine's load; and when the first
// exclusive request (a GC's, after its teardowns) was made.
type barrierWaits struct {
	*cache.DiskStore
	mu          sync.Mutex
	waits       []barrierWait
	exclusiveAt time.Time
}

type barrierWait struct {
	at   time.Time
	took time.Duration
}

var _ cache.Barrier = (*barrierWaits)(nil)

func (b *barrierWaits) Barrier(ctx context.Context, network string, exclusive bool) (cache.Unlocker, error) {
	at := time.Now()
	if exclusive {
		b.mu.Lock()
		if b.exclusiveAt.IsZero() {
			b.exclusiveAt = at
		}
		b.mu.Unlock()
	}
	u, err := b.DiskStore.Barrier(ctx, network, exclusive)
	if !exclusive {
		b.mu.Lock()
		b.waits = append(b.waits, barrierWait{at, time.Since(at)})
		b.mu.Unlock()
	}
	return u, err
}

// TestADDWaitsOnlyForGCForwards measures what ADDs wait for the network
// barrier while a GC runs, on the flock barrier (records in memory): GC's
// forwards take 100 ms per delegate (2 delegates), and a dead record's
// teardown 600 ms before them; ADDs start every 25 ms from the teardown's
// start. An ADD waits for the forwards that run when it asks, never for
// the teardown: an ADD that asks during the teardown takes the barrier at
// once, and none waits longer than the forwards.
func TestADDWaitsOnlyForGCForwards(t *testing.T) {
	store := &barrierWaits{DiskStore: cache.NewDiskStore(afero.NewMemMapFs(), "/cache",
		cache.NewFlockLocker(filepath.Join(t.TempDir(), cache.LocksDir)))}
	eng, exec, conf := barrierEngine(t, store, "dead")
	store.waits = nil // the setup's ADD
	const forward, teardown = 100 * time.Millisecond, 600 * time.Millisecond
	var teardownOnce sync.Once
	tearing := make(chan struct{})
	exec.onGC = func(context.Context, string) { time.Sleep(forward) }
	exec.onDel = func() {
		teardownOnce.Do(func() { close(tearing) })
		time.Sleep(teardown / 2)
	}

	start := time.Now()
	gcDone := make(chan time.Duration, 1)
	go func() {
		_, err := eng.CollectGarbage(context.Background(), gcReq(conf), GCOptions{Valid: []Attachment{}})
		assert.NoError(t, err)
		gcDone <- time.Since(start)
	}()
	<-tearing
	adds := 0
	for i := 0; ; i++ {
		select {
		case gcTook := <-gcDone:
			store.mu.Lock()
			waits, forwardsAt := store.waits, store.exclusiveAt
			store.mu.Unlock()
			require.Len(t, waits, adds, "one shared barrier per ADD")
			var during, longest time.Duration
			inTeardown := 0
			for _, w := range waits {
				longest = max(longest, w.took)
				if w.at.Before(forwardsAt) {
					inTeardown++
					during = max(during, w.took)
				}
			}
			t.Logf("GC took %s (teardown %s, forwards %s each); %d ADDs during it, %d asked during the teardown "+
				"and waited at most %s for the barrier; the longest wait %s",
				gcTook.Round(time.Millisecond), teardown, forward, adds, inTeardown, during.Round(time.Millisecond),
				longest.Round(time.Millisecond))
			require.Positive(t, inTeardown, "an ADD asked while GC tore down")
			assert.Less(t, during, 100*time.Millisecond, "an ADD never waits for GC's teardown")
			assert.Less(t, longest, 2*forward+100*time.Millisecond, "an ADD waits at most for the forwards")
			return
		default:
		}
		_, err := eng.Add(context.Background(), req(conf, fmt.Sprintf("pod%d", i)))
		require.NoError(t, err)
		adds++
		time.Sleep(25 * time.Millisecond)
	}
}

// TestADDDuringASlowDelegateGCSucceeds: the first delegate's GC, or every
// one's, hangs (until it is killed) and an ADD on the same network starts
// while the first one runs, on the real disk's barrier. The ADD must not
// fail with "try again later" for want of the barrier: a delegate's GC
// holds it for at most its share of a third of lockTimeout, then is cut
// and reported. And no delegate whose ADD of the new attachment came
// before its GC finished may miss it in its valid list.
func TestADDDuringASlowDelegateGCSucceeds(t *testing.T) {
	for _, tc := range []struct {
		name string
		hung []string
	}{
		{"first delegate's GC hangs", []string{"ipam"}},
		{"every delegate's GC hangs", []string{"ipam", "portmap"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			store := diskStore(dir)
			eng, exec, conf := barrierEngine(t, store, "old")
			conf.LockTimeout = 1200 * time.Millisecond // delegateTimeout stays 10 s
			require.Equal(t, 200*time.Millisecond, gcForwardBound(conf, 2), "a third of lockTimeout, shared by two delegates")

			type outcome struct {
				err  error
				took time.Duration
			}
			var once sync.Once
			added := make(chan outcome, 1)
			exec.onGC = func(ctx context.Context, typ string) {
				if typ == "ipam" {
					once.Do(func() {
						go func() {
							start := time.Now()
							_, err := eng.Add(context.Background(), req(conf, "newpod"))
							added <- outcome{err, time.Since(start)}
						}()
					})
				}
				if slices.Contains(tc.hung, typ) {
					<-ctx.Done() // longer than anything allows
				}
			}
			start := time.Now()
			_, gcErr := eng.CollectGarbage(context.Background(), gcReq(conf), GCOptions{Valid: []Attachment{{ContainerID: "old", IfName: "eth0"}}})
			gcTook := time.Since(start)
			add := <-added
			t.Logf("GC took %s; the ADD during it took %s; calls %v", gcTook.Round(time.Millisecond), add.took.Round(time.Millisecond), exec.order)

			// Its wait for the barrier is bounded by the GC's hold; the
			// ADD's own time also has its durable writes on a real disk.
			require.NoError(t, add.err, "an ADD during a slow delegate GC must not fail")
			require.Error(t, gcErr, "a cut GC is reported")
			for _, typ := range tc.hung {
				assert.Contains(t, gcErr.Error(), typ+") GC failed")
			}
			assert.Contains(t, gcErr.Error(), "cut at 200ms")
			assert.Less(t, gcTook, 5*time.Second, "a hung GC is cut at its bound, not at delegateTimeout")
			rec, err := eng.Store.Load(keyOf(conf, "newpod"))
			require.NoError(t, err)
			assert.Equal(t, cache.PhaseComplete, rec.Phase)

			for _, typ := range []string{"ipam", "portmap"} {
				gcs := exec.callsOf("GC", typ)
				require.Len(t, gcs, 1, typ)
				addAt, gcAt := exec.index("ADD "+typ+" newpod"), exec.index("GC "+typ+" ")
				require.GreaterOrEqual(t, addAt, 0, typ)
				if addAt < gcAt {
					assert.Contains(t, validOf(gcs[0]), "newpod",
						fmt.Sprintf("GC of %s came after newpod's ADD passed it (calls %v)", typ, exec.order))
				}
			}
		})
	}
}

// TestGCForwardBound: a delegate's GC under the barrier gets its
// delegateTimeout, at most a third of lockTimeout shared by the delegates.
func TestGCForwardBound(t *testing.T) {
	for _, tc := range []struct {
		delegate, lock time.Duration
		n              int
		want           time.Duration
	}{
		{60 * time.Second, 30 * time.Second, 1, 10 * time.Second},
		{60 * time.Second, 30 * time.Second, 2, 5 * time.Second},
		{60 * time.Second, 30 * time.Second, 0, 10 * time.Second},
		{2 * time.Second, 30 * time.Second, 2, 2 * time.Second},
	} {
		conf := &NetConf{DelegateTimeout: tc.delegate, LockTimeout: tc.lock}
		assert.Equal(t, tc.want, gcForwardBound(conf, tc.n), "%+v", tc)
	}
}
