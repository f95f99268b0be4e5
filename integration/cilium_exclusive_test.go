package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/internal/ciliumsim"
)

// ciliumBackoff is the agent's --rewrite-backoff here (a minute by
// default), and ciliumRun how long Cilium's exclusive mode works against
// the agent: two backoff periods and 5 s, so that the count shows the cap
// holding after a rewrite too, not only the first wait.
const (
	ciliumBackoff = 10 * time.Second
	ciliumRun     = 2*ciliumBackoff + 5*time.Second
)

// TestCiliumExclusiveMode runs the real catena-agent (resync 2 s) over a
// conf dir where ciliumsim does what Cilium's agent does with
// cni.exclusive: true: it writes 05-cilium.conflist and renames every other
// config to .cilium_bak, at start and after every change in the dir. The
// agent wraps Cilium's conflist, sees its file renamed away, says so (one
// warning, /readyz 503 naming Cilium and the fix, the metrics), rewrites it
// at most once per --rewrite-backoff (10 s here, a minute by default),
// catenactl doctor names it, and once Cilium stops renaming (cni.exclusive:
// false) the agent is ready again within that period.
func TestCiliumExclusiveMode(t *testing.T) {
	n := newAgentNode(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var renames []time.Time // of the generated conflist
	cil := &ciliumsim.Exclusive{Dir: n.confDir, BinDir: n.binDir, OnRename: func(name string) {
		if name == generatedName {
			mu.Lock()
			renames = append(renames, time.Now())
			mu.Unlock()
		}
	}}
	simDone := make(chan error, 1)
	go func() { simDone <- cil.Run(ctx) }()
	var simErr error
	stopCilium := sync.OnceFunc(func() { cancel(); simErr = <-simDone })
	t.Cleanup(stopCilium)
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(n.confDir, ciliumsim.ConfName))
		return err == nil
	}, 5*time.Second, 5*time.Millisecond)

	start := time.Now()
	p := n.spawnRun("--reconcile-interval", "0", // no runtime here: its warnings are not the point
		"--rewrite-backoff", ciliumBackoff.String())
	var detected time.Time
	var reason string
	for deadline := start.Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if ok, msg := p.ready(); !ok && strings.Contains(msg, "exclusive mode") {
			detected, reason = time.Now(), msg
			break
		}
	}
	probes, readyProbes := 0, 0
	for time.Since(start) < ciliumRun {
		if ok, _ := p.ready(); ok {
			readyProbes++
		}
		probes++
		time.Sleep(100 * time.Millisecond)
	}
	mu.Lock()
	renamed := append([]time.Time(nil), renames...)
	mu.Unlock()
	logText := p.logText()
	writes := strings.Count(logText, `msg="wrote the generated conflist"`)
	warns := strings.Count(logText, "level=WARN")
	fams := p.scrape()
	metricWrites := sampleSum(fams, "catena_conflist_writes_total")
	undone := sampleSum(fams, "catena_conflist_undone_total", "by=cilium")
	backoff := sampleSum(fams, "catena_conflist_backoff_seconds")
	latency := time.Duration(-1)
	detection := "never"
	if len(renamed) > 0 && !detected.IsZero() {
		latency = detected.Sub(renamed[0])
		detection = fmt.Sprintf("%s after the first rename (%s after the agent started)", latency.Round(100*time.Microsecond), detected.Sub(start).Round(time.Millisecond))
	}
	t.Logf("%s of Cilium's exclusive mode: %d writes of the generated conflist (1 first + %d rewrites), %d renames of it by Cilium (%d of all files); "+
		"/readyz named Cilium %s; ready at %d of %d probes; %d warning(s); metrics: writes %g, undone{by=cilium} %g, backoff %gs",
		ciliumRun, writes, writes-1, len(renamed), cil.Renamed.Load(), detection, readyProbes, probes, warns, metricWrites, undone, backoff)
	for k := 1; k < min(len(renamed), 6); k++ {
		t.Logf("rewrite %d renamed away %s after the one before", k, renamed[k].Sub(renamed[k-1]).Round(time.Millisecond))
	}

	doctor := exec.Command(filepath.Join(n.src, "catenactl"), "--conf", filepath.Join(n.confDir, generatedName),
		"--cache-dir", n.w.cacheDir, "--cni-path", n.binDir, "doctor")
	doctorOut, _ := doctor.CombinedOutput()
	t.Logf("catenactl doctor (exit %d):\n%s", doctor.ProcessState.ExitCode(), doctorOut)

	// The fix: Cilium's agents restarted with cni.exclusive: false rename
	// nothing any more.
	stopCilium()
	require.NoError(t, simErr)
	fixed := time.Now()
	p.waitFor("ready after Cilium stopped renaming", ciliumBackoff+10*time.Second, func() (bool, string) { return p.ready() })
	t.Logf("ready %s after Cilium stopped renaming", time.Since(fixed).Round(time.Millisecond))

	require.False(t, detected.IsZero(), "/readyz never named Cilium's exclusive mode\n%s", logText)
	assert.Less(t, latency, 3*time.Second, "detection within seconds of the rename")
	assert.GreaterOrEqual(t, latency, time.Duration(0))
	assert.Contains(t, reason, generatedName+" was renamed to "+generatedName+".cilium_bak by Cilium's exclusive mode")
	assert.Contains(t, reason, "set cni.exclusive: false")
	assert.Contains(t, reason, "in Cilium's chaining mode too")
	rewrites := writes - 1
	assert.LessOrEqual(t, rewrites, int(ciliumRun/ciliumBackoff), "at most one rewrite per backoff period")
	assert.GreaterOrEqual(t, rewrites, 1, "the agent does try again")
	assert.Equal(t, float64(writes), metricWrites)
	assert.Equal(t, float64(len(renamed)), undone, "every rename of the file counted")
	assert.Equal(t, ciliumBackoff.Seconds(), backoff)
	assert.Equal(t, 1, warns, "one warning:\n%s", logText)
	assert.Contains(t, logText, `msg="the generated conflist was taken away after catena-agent wrote it; backing off before rewriting it"`)
	assert.Contains(t, logText, "by=cilium")
	assert.Equal(t, rewrites, strings.Count(logText, `msg="the generated conflist was taken away again"`), "each later rename an info line")
	assert.Less(t, readyProbes*20, probes, "not ready (nearly) throughout")
	assert.Equal(t, 1, doctor.ProcessState.ExitCode())
	assert.Contains(t, string(doctorOut), "renamed to 00-catena.conflist.cilium_bak by Cilium's exclusive mode")
	assert.Contains(t, string(doctorOut), "hint: set cni.exclusive: false")
	assert.FileExists(t, filepath.Join(n.confDir, generatedName))
}
