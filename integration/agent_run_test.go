package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func tuningSysctl(val int) string {
	return fmt.Sprintf(`{"type":"tuning","sysctl":{"net.core.somaxconn":"%d"}}`, val)
}

// waitGenerated waits until the generated conflist satisfies cond and
// returns how long that took.
func (n *agentNode) waitGenerated(what string, cond func(string) bool) time.Duration {
	n.t.Helper()
	start := time.Now()
	path := filepath.Join(n.confDir, generatedName)
	for {
		raw, err := os.ReadFile(path)
		if err == nil && cond(string(raw)) {
			return time.Since(start)
		}
		if time.Since(start) > 30*time.Second {
			n.t.Fatalf("the generated conflist never came to %s (last read: %v)\n%s", what, err, raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAgentRunFollowsPrimary is §4 (3): under `run`, an edit of the primary
// (tuning added) reaches the next sandbox; a non-atomic rewrite of the
// primary, in two writes with a pause, never makes containerd's network
// not ready (CRI Status polled every 50ms) and never leaves an invalid
// generated file (read every 20ms): the last good one stays, the agent
// reports not ready meanwhile, and regenerates once the primary is whole.
func TestAgentRunFollowsPrimary(t *testing.T) {
	onBothContainerds(t, func(t *testing.T, n *agentNode) {
		p := n.startRun()
		n.waitLoaded(true)

		n.writePrimary(n.primary(tuningSysctl(777)))
		regen := n.waitGenerated("wrap tuning 777", func(s string) bool { return strings.Contains(s, `"777"`) })
		var id string // the probe that got the new conflist
		n.d.eventually("containerd loads the regenerated conflist", func() error {
			probe, err := n.d.runPod(n.d.podConfig("probe", 0))
			if err != nil {
				return err
			}
			if got := sysctlIn(t, n.podNetNS(probe), "net.core.somaxconn"); got != "777" {
				return fmt.Errorf("somaxconn %s in sandbox %s", got, probe)
			}
			id = probe
			return nil
		})
		assert.Equal(t, "777", sysctlIn(t, n.podNetNS(id), "net.core.somaxconn"), "tuning's sysctl in the new sandbox")
		recs := n.w.records(n.net)
		require.NotEmpty(t, recs)

		// the non-atomic rewrite: truncate, half, pause, the rest
		stop := make(chan struct{})
		poll := n.pollNetworkReady(stop)
		genBad, genReads, agentNotReady := 0, 0, 0
		watchDone := make(chan struct{})
		go func() {
			defer close(watchDone)
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				genReads++
				raw, err := os.ReadFile(filepath.Join(n.confDir, generatedName))
				if err != nil {
					genBad++
				} else if _, err := libcni.ConfListFromBytes(raw); err != nil {
					genBad++
				}
				if ok, _ := p.ready(); !ok {
					agentNotReady++
				}
			}
		}()
		whole := n.primary(tuningSysctl(778))
		f, err := os.OpenFile(filepath.Join(n.confDir, primaryName), os.O_WRONLY|os.O_TRUNC, 0)
		require.NoError(t, err)
		_, err = f.WriteString(whole[:len(whole)/2])
		require.NoError(t, err)
		require.NoError(t, f.Sync())
		const pause = 3 * time.Second // longer than the agent's reaction and its 2s resync
		time.Sleep(pause)
		_, err = f.WriteString(whole[len(whole)/2:])
		require.NoError(t, err)
		require.NoError(t, f.Close())
		regen2 := n.waitGenerated("wrap tuning 778", func(s string) bool { return strings.Contains(s, `"778"`) })
		time.Sleep(2 * time.Second) // containerd reloads; keep polling
		close(stop)
		<-poll.done
		<-watchDone
		p.waitReady()

		assert.Zero(t, poll.notReady, "containerd's network never went not ready: %q", poll.reasons)
		assert.Empty(t, poll.errs)
		assert.Zero(t, genBad, "the generated conflist was valid at every read")
		assert.Positive(t, agentNotReady, "the agent reported not ready while the primary was half-written")
		pods := n.d.pods()
		n.stopRemoveAll()
		n.requireNothingHeld(pods...)
		assert.Empty(t, n.w.records(n.net))

		// control: the poll sees what a half-written generated file
		// would do to containerd
		require.Zero(t, p.stop(), p.logText())
		gen, err := os.ReadFile(filepath.Join(n.confDir, generatedName))
		require.NoError(t, err)
		broken, err := os.OpenFile(filepath.Join(n.confDir, generatedName), os.O_WRONLY|os.O_TRUNC, 0)
		require.NoError(t, err)
		_, err = broken.Write(gen[:len(gen)/2])
		require.NoError(t, err)
		require.NoError(t, broken.Close())
		controlStop := make(chan struct{})
		control := n.pollNetworkReady(controlStop)
		time.Sleep(3 * time.Second)
		close(controlStop)
		<-control.done
		assert.Positive(t, control.notReady, "control: a half-written generated file makes containerd's network not ready")

		t.Logf("containerd %s, run: tuning edit reached the generated file in %s; non-atomic rewrite with a %s pause: "+
			"%d CRI Status polls, %d not ready; %d reads of the generated file, %d invalid; agent not ready in %d of them; "+
			"regenerated %s after the second write; control (half-written generated file, agent stopped): %d of %d polls not ready",
			n.v.name, regen.Round(time.Millisecond), pause, poll.polls, poll.notReady, genReads, genBad, agentNotReady, regen2.Round(time.Millisecond),
			control.notReady, control.polls)
	})
}

// TestAgentRestartKeepsCatena is §4 (4): SIGTERM stops `run` with exit 0 and
// leaves the generated conflist byte for byte; a sandbox started while the
// agent is down goes through Catena; the restarted agent is ready without
// rewriting the file.
func TestAgentRestartKeepsCatena(t *testing.T) {
	onBothContainerds(t, func(t *testing.T, n *agentNode) {
		p := n.startRun()
		n.waitLoaded(true)
		gen := filepath.Join(n.confDir, generatedName)
		before, err := os.ReadFile(gen)
		require.NoError(t, err)
		infoBefore, err := os.Stat(gen)
		require.NoError(t, err)

		require.Zero(t, p.stop(), p.logText())
		after, err := os.ReadFile(gen)
		require.NoError(t, err, "the conflist stays after SIGTERM")
		assert.Equal(t, before, after)

		const down = 3
		var ids []string
		for i := 0; i < down; i++ {
			id, err := n.d.runPod(n.d.podConfig("down", 0))
			require.NoError(t, err, n.d.logTail())
			ids = append(ids, id)
			adds := opsFor(catenaOps(t, n.w.cacheDir), "ADD", id)
			require.Len(t, adds, 1, "a sandbox started while the agent is down goes through Catena")
		}
		assert.Len(t, n.w.records(n.net), down)

		start := time.Now()
		n.startRun()
		restart := time.Since(start)
		infoAfter, err := os.Stat(gen)
		require.NoError(t, err)
		again, err := os.ReadFile(gen)
		require.NoError(t, err)
		assert.Equal(t, before, again)
		assert.True(t, os.SameFile(infoBefore, infoAfter), "the restarted agent did not rewrite the file")

		n.stopRemoveAll()
		n.requireNothingHeld(ids...)
		assert.Empty(t, n.w.records(n.net))
		t.Logf("containerd %s, SIGTERM+restart: conflist kept byte for byte; %d/%d sandboxes started while the agent was down went through Catena; "+
			"restarted agent ready in %s without rewriting",
			n.v.name, down, down, restart.Round(time.Millisecond))
	})
}
