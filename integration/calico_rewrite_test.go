package integration

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// confWatch reads the generated conflist as fast as it can until stop
// closes: how often it was missing, or not valid.
type confWatch struct {
	reads, missing, invalid int
}

// isCatenaConfList: raw is a conflist libcni loads, of one catena plugin.
func isCatenaConfList(raw []byte) bool {
	l, err := libcni.ConfListFromBytes(raw)
	return err == nil && len(l.Plugins) == 1 && l.Plugins[0].Network.Type == "catena"
}

func watchGenerated(path string, valid func([]byte) bool, stop <-chan struct{}) *confWatch {
	w := &confWatch{}
	for {
		select {
		case <-stop:
			return w
		default:
		}
		w.reads++
		raw, err := os.ReadFile(path)
		switch {
		case err != nil:
			w.missing++
		case !valid(raw):
			w.invalid++
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// generationSeen polls path every 5 ms from now on, and sends how long
// after start it first held generation gen; it closes the channel unsent if
// that takes longer than within.
func generationSeen(path string, gen int, start time.Time, within time.Duration) <-chan time.Duration {
	seen := make(chan time.Duration, 1)
	go func() {
		defer close(seen)
		for time.Since(start) < within {
			if raw, err := os.ReadFile(path); err == nil && generatedGen(raw) == gen {
				seen <- time.Since(start)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return seen
}

// TestCalicoRewritesFollowed: on containerd 2.4: a
// Calico-shaped primary, [calico, bandwidth, portmap] at 0.3.1 (calico is
// calicostub over ptp), rewritten 6 times in place as Calico's install-cni
// does (every second time in two halves 400 ms apart, longer than the
// agent's debounce) while sandboxes run and one starts right after each
// rewrite. The generated conflist follows each rewrite within the resync
// bound (2 s here); it is read every 2 ms and never missing or invalid;
// CRI Status's NetworkReady (every 50 ms) never false. At the end every
// sandbox is removed: the DEL of each gets the calico config of its own
// ADD, though most were made before the last rewrite, and nothing is
// held. The control, before the agent runs: without Catena, a sandbox
// made before a rewrite gets the new config at its DEL.
func TestCalicoRewritesFollowed(t *testing.T) {
	c := newCalicoNode(t)
	const resync = 2 * time.Second // startRun's --resync

	// control: plain Calico conflist, no agent
	c.writeCalico(0, false, nil)
	c.waitLoaded(false)
	ctl, err := c.runPod("calctl")
	require.NoError(t, err, c.d.logTail())
	require.Equal(t, 0, c.addGen(ctl))
	c.writeCalico(1, false, nil)
	c.d.eventually("containerd loads generation 1", func() error {
		id, err := c.runPod("calprobe")
		if err != nil {
			return err
		}
		if g := c.addGen(id); g != 1 {
			return assert.AnError
		}
		return nil
	})
	c.stopRemoveAll()
	controlGens := c.gens()[ctl]
	assert.Equal(t, [2]int{0, 1}, controlGens, "control: without Catena the DEL of a sandbox made at generation 0 gets generation 1")
	require.Empty(t, c.w.ipamFiles(c.net))

	p := c.startRun()
	c.waitLoaded(true)
	genPath := filepath.Join(c.confDir, generatedName)
	raw, err := os.ReadFile(genPath)
	require.NoError(t, err)
	require.Equal(t, 1, generatedGen(raw))
	before := map[string]bool{}
	for range 2 {
		id, err := c.runPod("calbefore")
		require.NoError(t, err, c.d.logTail())
		before[id] = true
	}

	stop := make(chan struct{})
	var watch *confWatch
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		watch = watchGenerated(genPath, func(raw []byte) bool { return generatedGen(raw) >= 0 }, stop)
	}()
	poll := c.pollNetworkReady(stop)
	const rewrites = 6
	var follows []time.Duration
	racing := 0
	for gen := 2; gen < 2+rewrites; gen++ {
		split := gen%2 == 1
		c.writeCalico(gen, split, func() { time.Sleep(400 * time.Millisecond) })
		start := time.Now()
		// timed apart from the sandbox below, whose start takes seconds on
		// a loaded machine
		seen := generationSeen(genPath, gen, start, 5*resync)
		// a sandbox racing the regeneration: made at the old config or
		// the new, whichever the runtime has loaded
		if _, err := c.runPod("calrace"); err == nil {
			racing++
		} else {
			t.Errorf("generation %d: a sandbox started during the rewrite failed: %v", gen, err)
		}
		follow, ok := <-seen
		if !ok {
			raw, err := os.ReadFile(genPath)
			t.Fatalf("the generated conflist never came to generation %d in %s (last read: %v)\n%s", gen, 5*resync, err, raw)
		}
		follows = append(follows, follow.Round(time.Millisecond))
		assert.Less(t, follow, resync, "generation %d followed within the resync bound", gen)
		c.d.eventually("a new sandbox gets the new generation", func() error {
			id, err := c.runPod("calafter")
			if err != nil {
				return err
			}
			if c.addGen(id) != gen {
				return assert.AnError
			}
			return nil
		})
	}
	time.Sleep(time.Second) // the runtime reloads the last one; keep polling
	close(stop)
	wg.Wait()
	<-poll.done
	p.waitReady()

	assert.Zero(t, watch.missing, "the generated conflist never went missing")
	assert.Zero(t, watch.invalid, "nor was it ever half-written")
	assert.Zero(t, poll.notReady, "containerd's network never went not ready: %q", poll.reasons)
	assert.Empty(t, poll.errs)

	pods := c.d.pods()
	held := len(c.w.ipamFiles(c.net))
	vethsHeld := hostVethsOn(t, c.w.subnet)
	c.stopRemoveAll()
	last := 1 + rewrites
	stale, mismatched := 0, 0
	for _, id := range pods {
		g := c.gens()[id]
		assert.Equal(t, g[0], g[1], "sandbox %s: its DEL got the calico config of its ADD (generation %d), not generation %d", id, g[0], g[1])
		if g[0] != g[1] {
			mismatched++
		}
		if g[0] != last {
			stale++
		}
	}
	assert.Positive(t, stale, "sandboxes made before the last rewrite were deleted")
	assert.Empty(t, c.d.pods())
	assert.Empty(t, c.w.ipamFiles(c.net), "no IP held")
	assert.Zero(t, hostVethsOn(t, c.w.subnet), "no host veth left")
	assert.Empty(t, c.w.records(c.net), "no record left")
	t.Logf("calico (calicostub over ptp) + bandwidth + portmap at 0.3.1, containerd 2.4: control without Catena: DEL of a generation-0 sandbox got generation %d; "+
		"%d rewrites in place (half of them in two writes 400 ms apart), generated conflist followed in %v (resync %s); "+
		"%d reads of it: %d missing, %d invalid; %d CRI Status polls, %d not ready; %d sandboxes (%d racing a rewrite) holding %d IPs, %d host veths; "+
		"all deleted: %d made before the last rewrite, %d DELs with another generation than their ADD; left: %d IPs, %d veths, %d records",
		controlGens[1], rewrites, follows, resync, watch.reads, watch.missing, watch.invalid, poll.polls, poll.notReady, len(pods), racing, held, vethsHeld,
		stale, mismatched, len(c.w.ipamFiles(c.net)), hostVethsOn(t, c.w.subnet), len(c.w.records(c.net)))
	for id := range before {
		assert.Equal(t, [2]int{1, 1}, c.gens()[id], "sandbox %s, made before every rewrite", id)
	}
}
