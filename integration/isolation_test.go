package integration

import (
	"github.com/catena-cni/catena/internal/proctest"

	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
)

const (
	isoAttachments = 40
	isoHungVictim  = 17 // the attachment whose delegate hangs
	isoLockVictim  = 29 // the attachment whose lock is held
	// isoRepeats rounds of each kind, interleaved (baseline, faults), so
	// that a burst of load from elsewhere on the node hits both kinds.
	isoRepeats = 3
	// isoMaxRatio: the other 38's p99 may exceed the baseline's by this
	// much at most. The hung delegate sleeps and the held lock's waiter
	// polls: neither takes CPU, so the true ratio is about 1; the slack is
	// for the noise of a saturated 2-core machine.
	isoMaxRatio = 1.5
	// isoDelegateTimeout ends the hung delegate; it is also the bound on
	// every other delegate of the 40 ADDs, which a saturated node must
	// stay well within.
	isoDelegateTimeout = 10 * time.Second
	// isoLockTimeout is how long the blocked attachment waits; no other
	// attachment ever waits for a lock.
	isoLockTimeout = 5 * time.Second
)

type isoKind string

const (
	isoBaseline isoKind = "baseline"
	// isoFaults: a hung delegate and a held lock, each in its own
	// attachment, in the same round
	isoFaults isoKind = "hung delegate + held lock"
)

// isoRound is one launch of the 40 concurrent ADDs.
type isoRound struct {
	kind      isoKind
	n         int
	latencies []time.Duration // of every attachment but the victims (all 40 for the baseline)
	hung      victimOutcome
	blocked   victimOutcome
}

// victimOutcome is how one faulted attachment's ADD ended.
type victimOutcome struct {
	err error
	dur time.Duration
}

// TestIsolationUnderConcurrentAdds: 40 concurrent ADDs on distinct
// attachments of a real chain [bridge + host-local, portmap, tuning,
// failer]. In a faulted round, the failer of one of them hangs for 30s
// (delegateTimeout 10s) and the lock of another is held by a holder that
// never releases (lockTimeout 5s). The 38 others must not notice: their
// p99 stays within isoMaxRatio of the p99 of the same 40 ADDs with
// nothing wrong, measured in the same test, in interleaved rounds (the
// median round of each kind is compared). The hung ADD ends at its
// timeout, rolled back with its whole process group killed; the blocked
// one fails with code 11 naming the holder, having touched nothing.
func TestIsolationUnderConcurrentAdds(t *testing.T) {
	w := newWorld(t)
	const net = "itiso"
	netns := make([]string, isoAttachments)
	for i := range netns {
		netns[i] = w.addNetns(fmt.Sprintf("%s-i%d", w.id, i))
	}
	locker := cache.NewFlockLocker(filepath.Join(w.cacheDir, "locks"))
	var rounds []*isoRound
	kinds := []isoKind{isoBaseline, isoFaults}
	for r := range isoRepeats {
		// The order alternates from one repeat to the next, so that
		// neither kind always runs first.
		for k := range kinds {
			kind := kinds[(k+r)%len(kinds)]
			round := &isoRound{kind: kind, n: len(rounds)}
			w.runIsoRound(t, net, netns, locker, round)
			rounds = append(rounds, round)
			t.Logf("round %d (%s, repeat %d): p99 %s of %d ADDs; hung %s, blocked %s", round.n, kind, r,
				p99(round.latencies), len(round.latencies), round.hung.dur.Round(time.Millisecond), round.blocked.dur.Round(time.Millisecond))
		}
	}

	base, got := medianP99(rounds, isoBaseline), medianP99(rounds, isoFaults)
	ratio := float64(got) / float64(base)
	t.Logf("%s: median p99 of the 38 others %s vs baseline %s: ratio %.2f (contract <= %.2f)",
		isoFaults, got.Round(time.Millisecond), base.Round(time.Millisecond), ratio, isoMaxRatio)
	assert.LessOrEqual(t, ratio, isoMaxRatio, "a hung delegate and a held lock delay the other attachments")
}

func medianP99(rounds []*isoRound, kind isoKind) time.Duration {
	var ps []time.Duration
	for _, r := range rounds {
		if r.kind == kind {
			ps = append(ps, p99(r.latencies))
		}
	}
	return medianOf(ps)
}

// runIsoRound launches the 40 ADDs at once, checks the victim's outcome and
// what it holds, then DELs all 40 and checks that nothing is left.
func (w *world) runIsoRound(t *testing.T, net string, netns []string, locker *cache.FlockLocker, round *isoRound) {
	pidFile := filepath.Join(t.TempDir(), "pids")
	rts := make([]*libcni.RuntimeConf, len(netns))
	lists := make([]*libcni.NetworkConfigList, len(netns))
	delLists := make([]*libcni.NetworkConfigList, len(netns))
	for i := range netns {
		rts[i] = &libcni.RuntimeConf{
			ContainerID: fmt.Sprintf("%s-r%d-%d", w.id, round.n, i), NetNS: netns[i], IfName: "eth0",
			CapabilityArgs: portMapping(22000 + 100*round.n + i),
		}
		last := failer("")
		if i == isoHungVictim && round.kind == isoFaults {
			last = hangingFailer("30s", pidFile)
		}
		lists[i] = w.timedList(net, isoLockTimeout.String(), isoDelegateTimeout.String(), w.bridgeDelegate(), portmapDelegate, tuningDelegate, last)
		// DEL runs with the config cached at ADD, but catena's own
		// delegateTimeout is today's: 40 portmap DELs queue on the xtables
		// lock, and the contract is about ADD.
		delLists[i] = w.timedList(net, isoLockTimeout.String(), "60s", w.bridgeDelegate(), portmapDelegate, tuningDelegate, last)
		w.delAtCleanup(delLists[i], rts[i])
	}
	release := func() {}
	if round.kind == isoFaults {
		u, err := locker.TryLock(cache.Key{Network: net, ContainerID: rts[isoLockVictim].ContainerID, IfName: "eth0"},
			cache.Holder{Verb: "ADD"})
		require.NoError(t, err)
		var once sync.Once
		release = func() { once.Do(func() { require.NoError(t, u.Unlock()) }) }
		defer release()
	}

	errs := make([]error, len(rts))
	durs := make([]time.Duration, len(rts))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range rts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			t0 := time.Now()
			_, errs[i] = w.cni.AddNetworkList(bg, lists[i], rts[i])
			durs[i] = time.Since(t0)
		}()
	}
	close(start)
	wg.Wait()

	faulted := round.kind == isoFaults
	for i := range rts {
		if faulted && (i == isoHungVictim || i == isoLockVictim) {
			continue
		}
		require.NoError(t, errs[i], "round %d (%s): attachment %d", round.n, round.kind, i)
		round.latencies = append(round.latencies, durs[i])
	}
	if faulted {
		round.hung = victimOutcome{errs[isoHungVictim], durs[isoHungVictim]}
		round.blocked = victimOutcome{errs[isoLockVictim], durs[isoLockVictim]}
		w.checkHungVictim(t, net, rts[isoHungVictim], pidFile, round.hung)
		w.checkBlockedVictim(t, net, rts[isoLockVictim], round.blocked)
	}
	assert.Len(t, w.records(net), isoAttachments-2*boolInt(faulted))
	release() // the holder that "never releases" goes only now, after the round

	var dwg sync.WaitGroup
	delErrs := make([]error, len(rts))
	for i := range rts {
		dwg.Add(1)
		go func() {
			defer dwg.Done()
			delErrs[i] = w.cni.DelNetworkList(bg, delLists[i], rts[i])
		}()
	}
	dwg.Wait()
	for i, err := range delErrs {
		require.NoError(t, err, "round %d: DEL of attachment %d", round.n, i)
	}
	require.Empty(t, w.ipamFiles(net))
	require.Empty(t, w.hostVeths())
	require.Empty(t, w.records(net))
	require.Empty(t, w.lockFiles())
	// Let the kernel finish unregistering the 40 veths (it does so in the
	// background, under the rtnl lock) before the next round is measured.
	time.Sleep(time.Second)
}

// checkHungVictim: the hung ADD ended at its timeout, was rolled back, its
// delegate's whole group is dead and it holds nothing.
func (w *world) checkHungVictim(t *testing.T, net string, victim *libcni.RuntimeConf, pidFile string, o victimOutcome) {
	err := o.err
	require.Error(t, err)
	assert.Equal(t, types.ErrTryAgainLater, cniCode(err), "%v", err)
	assert.Contains(t, err.Error(), "delegate 3 (failer) ADD failed")
	assert.Contains(t, err.Error(), "timed out after "+isoDelegateTimeout.String()+" (delegateTimeout)")
	assert.Contains(t, err.Error(), "; rolled back")
	assert.GreaterOrEqual(t, o.dur, isoDelegateTimeout)
	assert.Less(t, o.dur, 30*time.Second, "ended at its timeout, not after its 30s hang")
	failerPID, childPID := failerPIDs(t, pidFile)
	assert.True(t, proctest.Gone(t, failerPID))
	assert.True(t, proctest.Gone(t, childPID))
	w.holdsNothing(t, net, victim)
}

// checkBlockedVictim: only the attachment whose lock is held waited, and it
// failed with code 11 naming the holder, having invoked nothing.
func (w *world) checkBlockedVictim(t *testing.T, net string, victim *libcni.RuntimeConf, o victimOutcome) {
	err := o.err
	require.Error(t, err)
	assert.Equal(t, types.ErrTryAgainLater, cniCode(err), "%v", err)
	assert.Contains(t, err.Error(), fmt.Sprintf("is locked by pid %d (ADD since", os.Getpid()))
	assert.GreaterOrEqual(t, o.dur, isoLockTimeout, "it waited lockTimeout")
	w.holdsNothing(t, net, victim)
}

// holdsNothing: no IP, no interface, no iptables rule and no record for the
// attachment.
func (w *world) holdsNothing(t *testing.T, net string, rt *libcni.RuntimeConf) {
	for ip, owner := range w.ipOwners(net) {
		assert.NotEqual(t, rt.ContainerID, owner, "IP %s still held", ip)
	}
	assert.Empty(t, w.sandboxAddrsOf(rt.NetNS, "eth0"))
	assert.False(t, portmapRulesFor(run(t, "iptables-save"), rt.ContainerID))
	for _, r := range w.records(net) {
		assert.NotContains(t, filepath.Base(r), rt.ContainerID+":")
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
