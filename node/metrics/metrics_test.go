package metrics

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain/events"
	"github.com/catena-cni/catena/node/nodeconf"
	"github.com/catena-cni/catena/node/reconcile"
)

func opLine(t *testing.T, verb, outcome string, d time.Duration) string {
	t.Helper()
	b, err := json.Marshal(events.Op{Verb: verb, Outcome: outcome, Duration: d, Start: time.Now()})
	require.NoError(t, err)
	return string(b) + "\n"
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	require.NoError(t, err)
	_, err = f.WriteString(s)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// TestJournalTail: every operation is counted once, across polls, a line
// written in two halves, a rotation between polls, and junk of every kind
// (skipped and counted, in bounded memory).
func TestJournalTail(t *testing.T) {
	dir := t.TempDir()
	path := events.Path(dir)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	m := New()
	tail := NewJournalTail(dir, m)
	ops := func(verb, outcome string) float64 { return testutil.ToFloat64(m.ops.WithLabelValues(verb, outcome)) }

	require.NoError(t, tail.Poll(), "no journal yet")
	appendTo(t, path+".1", opLine(t, "ADD", "ok", time.Millisecond))
	appendTo(t, path, opLine(t, "ADD", "ok", 20*time.Millisecond)+opLine(t, "DEL", "error", time.Second))
	require.NoError(t, tail.Poll())
	assert.Equal(t, 2.0, ops("add", "ok"), "the rotated file is read first")
	assert.Equal(t, 1.0, ops("del", "error"))

	junk := "not json\n" + strings.Repeat("x", 200<<10) + "\n" + "\xff\xfe\n" + `{"verb":"` + strings.Repeat("Z", 100) + `","outcome":"ok"}` + "\n" + "{}\n"
	half := opLine(t, "GC", "ok", time.Millisecond)
	appendTo(t, path, junk+half[:10])
	require.NoError(t, tail.Poll())
	assert.Equal(t, 4.0, testutil.ToFloat64(m.skippedLines.WithLabelValues(ReaderMetrics)))
	assert.Equal(t, 1.0, ops("other", "ok"), "a hostile verb is one bounded label")
	assert.Equal(t, 0.0, ops("gc", "ok"), "half a line waits")
	appendTo(t, path, half[10:])
	require.NoError(t, tail.Poll())
	assert.Equal(t, 1.0, ops("gc", "ok"))

	// Rotation: lines appended to the old file after the last poll are
	// read from .1, then the new file from its start.
	appendTo(t, path, opLine(t, "DEL", "ok", time.Millisecond))
	require.NoError(t, os.Rename(path, path+".1"))
	appendTo(t, path, opLine(t, "DEL", "ok", time.Millisecond)+opLine(t, "RECLAIM", "ok", time.Millisecond))
	require.NoError(t, tail.Poll())
	require.NoError(t, tail.Poll())
	assert.Equal(t, 2.0, ops("del", "ok"))
	assert.Equal(t, 1.0, ops("reclaim", "ok"))
	assert.Equal(t, 2.0, ops("add", "ok"), "nothing counted twice")
	assert.Equal(t, 4.0, testutil.ToFloat64(m.skippedLines.WithLabelValues(ReaderMetrics)))
	n, err := testutil.GatherAndCount(m.Registry, "catena_operation_duration_seconds")
	require.NoError(t, err)
	assert.Equal(t, 6, n, "one histogram per verb and outcome seen: add, del ok and error, gc, reclaim, other")
	appendTo(t, path, opLine(t, "RELEASE", "ok", time.Millisecond))
	require.NoError(t, tail.Poll())
	assert.Equal(t, 1.0, ops("release", "ok"), "a leak's release, as repair --from-report journals it")
}

// TestObservePassAndLint: a pass's report sets the gauges and counters,
// and the whole exposition passes client_golang's linter.
func TestObservePassAndLint(t *testing.T) {
	m := New()
	m.ObservePass(&reconcile.Report{Start: time.Now(), Candidates: 3, Marked: 2, Reclaimed: 1, Kept: 4, RuntimeError: "refused",
		Retried: 1, RetryFailed: 2, Abandoned: 1, Held: 2, OldestHeld: 90 * time.Second, Errors: []string{"x"},
		Counts: []reconcile.RecordCount{{Network: "podnet", Phase: string(cache.PhaseComplete), Count: 7}, {Network: "podnet", Phase: "unreadable", Count: 1}}})
	m.ObservePass(&reconcile.Report{Start: time.Now(), Kept: 5, EmptyList: true, Counts: []reconcile.RecordCount{{Network: "podnet", Phase: string(cache.PhaseComplete), Count: 6}}})
	m.ObserveAdoption(3, 1, 0)
	m.ObserveOp(events.Op{Verb: "ADD", Outcome: "ok", Attachment: "podnet/c0ffee/eth0", Duration: time.Millisecond, LockWait: time.Millisecond,
		Writes: time.Millisecond, WriteCount: 2, Calls: []events.OpCall{{Type: "bridge", Verb: "ADD", Duration: time.Millisecond}}})
	assert.Equal(t, 2.0, testutil.ToFloat64(m.passes))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.passErrors))
	assert.Equal(t, 3.0, testutil.ToFloat64(m.candidates))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.reclaimed))
	assert.Equal(t, 4.0, testutil.ToFloat64(m.kept.WithLabelValues("runtime")))
	assert.Equal(t, 5.0, testutil.ToFloat64(m.kept.WithLabelValues("empty-list")), "the doubt of an empty sandbox list")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.runtimeErrors))
	assert.Equal(t, 2.0, testutil.ToFloat64(m.retries.WithLabelValues("error")))
	assert.Equal(t, 6.0, testutil.ToFloat64(m.records.WithLabelValues("podnet", "complete")))
	n, err := testutil.GatherAndCount(m.Registry, "catena_records")
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the unreadable series of the earlier pass is gone")
	assert.Equal(t, 0.0, testutil.ToFloat64(m.held), "the last pass's")
	assert.Equal(t, 3.0, testutil.ToFloat64(m.adoptions.WithLabelValues("adopted")))

	problems, err := testutil.GatherAndLint(m.Registry)
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// TestConflistMetrics: the install loop's writes, who took the file, and
// the backoff, as /metrics shows them.
func TestConflistMetrics(t *testing.T) {
	m := New()
	m.ConflistWritten()
	m.ConflistWritten()
	m.ConflistTaken(nodeconf.TakenByCilium)
	m.ConflistTaken("someone")
	m.ConflistBackoff(time.Minute)
	want := `
# HELP catena_conflist_backoff_seconds How long the install loop waits after its last write before rewriting the generated conflist that someone keeps taking away (0: no backoff).
# TYPE catena_conflist_backoff_seconds gauge
catena_conflist_backoff_seconds 60
# HELP catena_conflist_undone_total Times the generated conflist a pass left in place was renamed, removed or changed by someone else, by whom: cilium (its cni.exclusive renamed it to .cilium_bak) or other.
# TYPE catena_conflist_undone_total counter
catena_conflist_undone_total{by="cilium"} 1
catena_conflist_undone_total{by="other"} 1
# HELP catena_conflist_writes_total Writes of the generated conflist by the install loop (the first, and each rewrite).
# TYPE catena_conflist_writes_total counter
catena_conflist_writes_total 2
`
	require.NoError(t, testutil.GatherAndCompare(m.Registry, strings.NewReader(want),
		"catena_conflist_writes_total", "catena_conflist_undone_total", "catena_conflist_backoff_seconds"))
	m.ConflistBackoff(0)
	assert.Equal(t, 0.0, testutil.ToFloat64(m.conflistBackoff))
}

// TestProbeGauges: catena_agent_ready follows the readiness check at each
// scrape, and catena_dir_writable sees a dir the agent cannot write, a dir
// not made yet by its parent, and registering either twice is an error.
func TestProbeGauges(t *testing.T) {
	m := New()
	var notReady error
	require.NoError(t, m.ReadinessGauge(func() error { return notReady }))
	assert.Equal(t, 1.0, gather(t, m, "catena_agent_ready", ""))
	notReady = assert.AnError
	assert.Equal(t, 0.0, gather(t, m, "catena_agent_ready", ""))
	require.Error(t, m.ReadinessGauge(func() error { return nil }))

	cacheDir := t.TempDir() // events/ is not made yet: judged by cacheDir
	require.NoError(t, m.WritableGauges(cacheDir))
	assert.Equal(t, 1.0, gather(t, m, "catena_dir_writable", "cache"))
	assert.Equal(t, 1.0, gather(t, m, "catena_dir_writable", "journal"))
	if os.Geteuid() != 0 { // root writes through any mode
		require.NoError(t, os.Chmod(cacheDir, 0o500))
		t.Cleanup(func() { _ = os.Chmod(cacheDir, 0o700) })
		assert.Equal(t, 0.0, gather(t, m, "catena_dir_writable", "cache"))
		assert.Equal(t, 0.0, gather(t, m, "catena_dir_writable", "journal"))
	}
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	assert.Equal(t, 0.0, writable(filepath.Join(file, "events")), "a cache dir that is not a dir, root too")
	require.Error(t, m.WritableGauges(cacheDir), "registered twice")
}

// TestWritableSeesAFullOrReadOnlyFilesystem: the write probe reads 0 on a
// full tmpfs and on a read-only bind mount, 1 once space is back, and
// leaves nothing in the dir.
func TestWritableSeesAFullOrReadOnlyFilesystem(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("mounting a tmpfs needs root (CI=true: this test must run)")
		}
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	require.NoError(t, unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k,mode=0700"))
	t.Cleanup(func() { assert.NoError(t, unix.Unmount(dir, unix.MNT_DETACH)) })
	assert.Equal(t, 1.0, writable(dir))

	fill := filepath.Join(dir, "fill")
	f, err := os.OpenFile(fill, os.O_CREATE|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	for err == nil {
		_, err = f.Write(make([]byte, 4096))
	}
	require.ErrorIs(t, err, unix.ENOSPC)
	require.NoError(t, f.Close())
	assert.Equal(t, 0.0, writable(dir), "full")
	assert.Equal(t, 0.0, writable(filepath.Join(dir, "events")), "full, judged by the parent")
	require.NoError(t, os.Remove(fill))
	assert.Equal(t, 1.0, writable(dir), "space is back")

	ro := t.TempDir()
	require.NoError(t, unix.Mount(dir, ro, "", unix.MS_BIND, ""))
	t.Cleanup(func() { assert.NoError(t, unix.Unmount(ro, unix.MNT_DETACH)) })
	require.NoError(t, unix.Mount("", ro, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""))
	assert.Equal(t, 0.0, writable(ro), "read-only")
	assert.Equal(t, 1.0, writable(dir), "the same filesystem, writable where it is not read-only")

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "the probe leaves nothing in the dir")
}

// gather returns the value of name's gauge (with dir=label if not empty).
func gather(t *testing.T, m *Metrics, name, label string) float64 {
	t.Helper()
	labels := map[string]string{}
	if label != "" {
		labels["dir"] = label
	}
	s := series(t, m, name, labels)
	require.NotNil(t, s, "no series %s %s", name, label)
	return s.GetGauge().GetValue()
}

// series returns the series of family name whose labels are exactly
// labels, or nil.
func series(t *testing.T, m *Metrics, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := m.Registry.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, s := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range s.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if assert.ObjectsAreEqual(labels, got) {
				return s
			}
		}
	}
	return nil
}

// TestNetNSReplacedCounted: every attachment an operation tore down without
// CNI_NETNS, because another namespace stood at its path, is counted.
func TestNetNSReplacedCounted(t *testing.T) {
	m := New()
	m.ObserveOp(events.Op{Verb: "DEL", Outcome: "ok", NetNSReplaced: []string{"podnet/a/eth0"}})
	m.ObserveOp(events.Op{Verb: "GC", Outcome: "ok", NetNSReplaced: []string{"podnet/b/eth0", "podnet/c/eth0"}})
	m.ObserveOp(events.Op{Verb: "DEL", Outcome: "ok"})
	assert.Equal(t, 3.0, testutil.ToFloat64(m.netnsReplaced))
}

// TestNoRecordDelsCounted: each DEL with no record that found a tombstone
// or was handed a result is counted by its outcome; a hostile outcome is
// "other"; a DEL without either is not counted.
func TestNoRecordDelsCounted(t *testing.T) {
	m := New()
	for _, o := range []string{"tombstone", "kept", "kept", "released", "partial", "failed", "<junk>"} {
		m.ObserveOp(events.Op{Verb: "DEL", Outcome: "ok", NoRecordRelease: &events.OpRelease{Outcome: o}})
	}
	m.ObserveOp(events.Op{Verb: "DEL", Outcome: "ok"})
	want := map[string]float64{"tombstone": 1, "kept": 2, "released": 1, "partial": 1, "failed": 1, "other": 1}
	for o, n := range want {
		assert.Equal(t, n, testutil.ToFloat64(m.noRecordDels.WithLabelValues(o)), o)
	}
}
