package integration

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/internal/silent"
	"github.com/catena-cni/catena/libchain/events"
)

// faultBurst is how many pods each phase of TestTraceExportFaults starts.
const faultBurst = 50

// traceFaultNode is a node whose agent exports a root trace of every
// operation to a private Jaeger, and a light chain [spy, failer that never
// fails] that libcni runs through catena, with no trace context: the pods
// all share the world's netns, and nothing but the journal, the records
// and the spy's log is written.
type traceFaultNode struct {
	*agentNode
	j     *jaeger
	agent *agentProc
	list  *libcni.NetworkConfigList
}

func (tn *traceFaultNode) startAgent(t *testing.T) {
	tn.agent = tn.startRun("--reconcile-interval", "0")
}

// burst starts faultBurst pods named prefix-<n> one after the other, each
// ADD required to succeed, and returns each ADD's latency; after is called
// once after the first half.
func (tn *traceFaultNode) burst(t *testing.T, prefix string, after func()) []time.Duration {
	t.Helper()
	var lat []time.Duration
	for i := range faultBurst {
		if i == faultBurst/2 && after != nil {
			after()
		}
		rt := &libcni.RuntimeConf{ContainerID: fmt.Sprintf("%s-%s-%d", tn.w.id, prefix, i), NetNS: tn.w.netns, IfName: "eth0"}
		start := time.Now()
		_, err := tn.w.cni.AddNetworkList(context.Background(), tn.list, rt)
		lat = append(lat, time.Since(start))
		require.NoError(t, err, "ADD %s: the trace export is never in a CNI call's way", rt.ContainerID)
		t.Cleanup(func() { _ = tn.w.cni.DelNetworkList(context.Background(), tn.list, rt) })
	}
	return lat
}

// traces are the root traces of the ADDs of the pods named prefix-*.
func (tn *traceFaultNode) traces(t *testing.T, prefix string) []string {
	t.Helper()
	ops, _, err := events.Read(afero.NewOsFs(), tn.w.cacheDir, time.Time{})
	require.NoError(t, err)
	var ids []string
	for _, op := range ops {
		if op.Verb == "ADD" && strings.Contains(op.Attachment, "/"+tn.w.id+"-"+prefix+"-") {
			id, continued := op.TraceOf()
			require.False(t, continued)
			ids = append(ids, id)
		}
	}
	require.Len(t, ids, faultBurst, "the journal holds every ADD of %s", prefix)
	return ids
}

// exported counts, of traces, those Jaeger holds and those whose
// operation's span it holds more than once (Trace fails the test on any
// other error).
func (tn *traceFaultNode) exported(t *testing.T, traces []string) (found, duplicated int) {
	t.Helper()
	for _, id := range traces {
		spans, err := tn.j.Trace(t, id)
		if errors.Is(err, errNoTrace) {
			continue
		}
		require.NoError(t, err)
		ops := 0
		for _, s := range spans {
			if s.Name == "CNI ADD" {
				ops++
			}
		}
		if ops > 0 {
			found++
		}
		if ops > 1 {
			duplicated++
		}
	}
	return found, duplicated
}

// waitExported waits until Jaeger holds every one of traces.
func (tn *traceFaultNode) waitExported(t *testing.T, what string, traces []string, limit time.Duration) time.Duration {
	t.Helper()
	return waitFor(t, what, limit, 250*time.Millisecond, func() error {
		if found, _ := tn.exported(t, traces); found < len(traces) {
			return fmt.Errorf("%d of %d traces in Jaeger", found, len(traces))
		}
		return nil
	})
}

// rssKiB is the agent's resident set, from /proc.
func (tn *traceFaultNode) rssKiB(t *testing.T) int {
	t.Helper()
	kib, ok := procStatusKB(tn.agent.cmd.Process.Pid, "VmRSS:")
	require.True(t, ok, "no VmRSS")
	return int(kib)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// agentRSSBound is the most the agent's resident set may grow while the
// collector is down or slow, over what it was with the collector up: the
// export queue's bound (4096 operations of a few hundred bytes each here)
// and the spans of one batch, with room for the Go heap's slack.
const agentRSSBound = 32 << 10 // KiB

// TestTraceExportFaults: the collector stopped, then a listener that never
// answers, then the collector restarted during a burst, each with 50 pods
// started: every ADD succeeds with its latency unchanged, the agent's
// memory stays within agentRSSBound of what it was, and every operation's
// spans reach the collector once it is back, once each. Then the agent is
// restarted in the middle of a burst: no operation is exported twice, and
// at most one batch is lost.
func TestTraceExportFaults(t *testing.T) {
	j := startJaeger(t)
	n := newAgentNode(t, nil)
	tn := &traceFaultNode{agentNode: n, j: j}
	n.env = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + j.OTLPGRPC, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_SERVICE_NAME=catena-" + n.w.id, "OTEL_TRACES_SAMPLER=parentbased_always_on", "OTEL_EXPORTER_OTLP_TIMEOUT=2000"}
	n.writePrimary(n.primary())
	tn.startAgent(t)
	tn.list = n.w.catenaList(n.net, "1.1.0", fmt.Sprintf(`{"type":"spy","logDir":%q}`, t.TempDir()),
		fmt.Sprintf(`{"type":"failer","failAdd":true,"faultFile":%q}`, filepath.Join(t.TempDir(), "never")))

	type phase struct {
		name string
		lat  []time.Duration
		rss  int
	}
	var phases []phase
	record := func(name string, lat []time.Duration) {
		phases = append(phases, phase{name: name, lat: lat, rss: tn.rssKiB(t)})
	}

	record("collector up", tn.burst(t, "up", nil))
	tn.waitExported(t, "the healthy collector holds every ADD's trace", tn.traces(t, "up"), 30*time.Second)
	failures := tn.agent.metric("catena_trace_export_failures_total")

	j.Stop(t)
	record("collector stopped", tn.burst(t, "stopped", nil))
	_, stop := silent.Listen(t, j.OTLPGRPC) // a collector that never answers
	record("collector never answers", tn.burst(t, "hole", nil))
	time.Sleep(3 * time.Second) // one export call past its 2 s timeout
	assert.Greater(t, tn.agent.metric("catena_trace_export_failures_total"), failures, "the exports failed")
	failed := tn.agent.metric("catena_trace_export_failures_total") - failures
	stop()
	record("collector restarted during the burst", tn.burst(t, "restarted", func() { j.Start(t) }))
	missed := slices.Concat(tn.traces(t, "stopped"), tn.traces(t, "hole"), tn.traces(t, "restarted"))
	resumed := tn.waitExported(t, "every operation of the outage reaches the collector once it is back", missed, time.Minute)
	_, dup := tn.exported(t, missed)
	assert.Zero(t, dup, "no operation exported twice")

	// The agent restarted in the middle of a burst, once it has sent the
	// burst's first half: the next one sends neither those nor anything
	// before them again.
	record("agent restarted during the burst", tn.burst(t, "agent", func() {
		time.Sleep(2500 * time.Millisecond) // two of the export's polls
		require.Zero(t, tn.agent.stop())
		tn.startAgent(t)
	}))
	last := tn.traces(t, "agent")
	time.Sleep(3 * time.Second) // three of the export's polls
	waitFor(t, "the export's queue is empty", 30*time.Second, 250*time.Millisecond, func() error {
		if q := tn.agent.metric("catena_trace_queue_operations"); q > 0 {
			return fmt.Errorf("%v queued", q)
		}
		return nil
	})
	found, dup := tn.exported(t, last)
	assert.Zero(t, dup, "no operation exported twice across the agent's restart")
	_, dup = tn.exported(t, missed)
	assert.Zero(t, dup, "nor any of those sent before it")
	assert.GreaterOrEqual(t, found, faultBurst-256, "at most one batch lost")

	base := phases[0]
	var b strings.Builder
	for _, p := range phases {
		fmt.Fprintf(&b, "%s: ADD median %s, max %s, agent RSS %d KiB; ", p.name, median(p.lat).Round(10*time.Microsecond),
			slices.Max(p.lat).Round(10*time.Microsecond), p.rss)
		assert.LessOrEqual(t, median(p.lat), 2*median(base.lat)+10*time.Millisecond, "%s: ADD latency unchanged", p.name)
		assert.LessOrEqual(t, p.rss, base.rss+agentRSSBound, "%s: the agent's memory stays bounded", p.name)
	}
	t.Logf("TRACE-FAULTS %s%v export calls failed while it was stopped or never answered; the outage's %d operations all in Jaeger %s after it was back, none twice; agent restarted mid-burst: %d of %d exported, none twice",
		b.String(), failed, len(missed), resumed.Round(time.Millisecond), found, faultBurst)
}

// agentCPU is the agent's CPU time so far (utime+stime, /proc/<pid>/stat).
func (tn *traceFaultNode) agentCPU(t *testing.T) time.Duration {
	t.Helper()
	return procCPU(t, tn.agent.cmd.Process.Pid)
}

// TestTraceExportCost measures what exporting 1,000 operations costs the
// agent: 1,000 ADDs of a three-delegate chain appended to the journal at
// once, each 5 spans (the operation, its lock wait, 3 calls), sent to
// Jaeger; the agent's CPU and resident set before and after, beside its CPU
// over as long with nothing to send.
func TestTraceExportCost(t *testing.T) {
	const ops = 1000
	j := startJaeger(t)
	n := newAgentNode(t, nil)
	tn := &traceFaultNode{agentNode: n, j: j}
	n.env = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + j.OTLPGRPC, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_SERVICE_NAME=catena-" + n.w.id, "OTEL_TRACES_SAMPLER=parentbased_always_on"}
	n.writePrimary(n.primary())
	tn.startAgent(t)
	tn.list = n.w.catenaList(n.net, "1.1.0", fmt.Sprintf(`{"type":"spy","logDir":%q}`, t.TempDir()))
	tn.burst(t, "first", nil) // the journal's directory, and a warm agent
	waitFor(t, "the first burst exported", 30*time.Second, 100*time.Millisecond, func() error {
		if q := tn.agent.metric("catena_trace_spans_exported_total"); q < 3*faultBurst {
			return fmt.Errorf("%v spans", q)
		}
		return nil
	})
	exported := tn.agent.metric("catena_trace_spans_exported_total")

	idle0 := tn.agentCPU(t)
	time.Sleep(5 * time.Second)
	idle := tn.agentCPU(t) - idle0

	w := &events.Writer{CacheDir: n.w.cacheDir}
	t0 := time.Now()
	for i := range ops {
		op := events.Op{Verb: "ADD", Attachment: fmt.Sprintf("%s/%s-cost-%d/eth0", n.net, n.w.id, i), Start: t0, Duration: 40 * time.Millisecond,
			LockWait: time.Millisecond, Writes: 2 * time.Millisecond, WriteCount: 3, Outcome: "ok", SpanID: fmt.Sprintf("%016x", 0xc0570000+i),
			Pod: &events.OpPod{Namespace: "default", Name: fmt.Sprintf("web-%d", i), UID: fmt.Sprintf("uid-%d", i)}}
		for c, typ := range []string{"bridge", "portmap", "tuning"} {
			op.Calls = append(op.Calls, events.OpCall{Index: c, Type: typ, Verb: "ADD", StartOffset: time.Duration(2+12*c) * time.Millisecond,
				Duration: 10 * time.Millisecond, SpanID: fmt.Sprintf("%016x", 0xca110000+3*i+c)})
		}
		require.NoError(t, w.Append(op))
	}
	cpu0, rss0 := tn.agentCPU(t), tn.rssKiB(t)
	want := exported + 5*ops
	took := waitFor(t, "the 1,000 operations exported", time.Minute, 50*time.Millisecond, func() error {
		if got := tn.agent.metric("catena_trace_spans_exported_total"); got < want {
			return fmt.Errorf("%v of %v spans", got, want)
		}
		return nil
	})
	cpu, rss := tn.agentCPU(t)-cpu0, tn.rssKiB(t)
	assert.Equal(t, want, tn.agent.metric("catena_trace_spans_exported_total"), "each span once")
	found, dup := tn.exported(t, []string{tracesOf(0xc0570000, 1)[0], tracesOf(0xc0570000+ops-1, 1)[0]})
	assert.Equal(t, 2, found, "the first and the last in Jaeger")
	assert.Zero(t, dup)
	assert.LessOrEqual(t, rss, rss0+agentRSSBound, "the agent's memory stays bounded")
	t.Logf("TRACE-COST %d operations (%d spans) exported in %s: agent CPU %s (%s per 1,000 operations; idle %s per 5 s), RSS %d KiB before, %d KiB after (%+d KiB)",
		ops, 5*ops, took.Round(time.Millisecond), cpu, cpu*1000/ops, idle, rss0, rss, rss-rss0)
}

// tracesOf are the root traces of n operations whose span IDs count up
// from first (as TestTraceExportCost names them).
func tracesOf(first, n int) []string {
	var out []string
	for i := range n {
		id, _ := events.Op{SpanID: fmt.Sprintf("%016x", first+i)}.TraceOf()
		out = append(out, id)
	}
	return out
}
