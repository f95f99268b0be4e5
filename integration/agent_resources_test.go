package integration

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/catena-cni/catena/libchain/events"
)

// The agent's worst case, measured by TestAgentResources.
const (
	resourceRecords = 10000 // Catena records of live sandboxes
	resourceAdopted = 150   // the primary's libcni cache entries to adopt (a node restarted with 150 pods)
	resourceFlood   = 20000 // journal lines appended as fast as the test can while the agent runs
)

// agentUsage is catena-agent's peak RSS (VmHWM) and CPU time so far.
type agentUsage struct {
	hwm, rss, anon int64         // kB
	cpu            time.Duration // utime+stime
}

func readUsage(t *testing.T, pid int) agentUsage {
	t.Helper()
	u := agentUsage{cpu: procCPU(t, pid)}
	for key, dst := range map[string]*int64{"VmHWM:": &u.hwm, "VmRSS:": &u.rss, "RssAnon:": &u.anon} {
		v, ok := procStatusKB(pid, key)
		require.True(t, ok, "%s in /proc/%d/status", key, pid)
		*dst = v
	}
	return u
}

// chartLimit is a resource limit of the chart's default values.
func chartLimit(t *testing.T, name string) resource.Quantity {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(), "deploy", "chart", "catena", "values.yaml"))
	require.NoError(t, err)
	var v struct {
		Resources struct {
			Limits map[string]string `json:"limits"`
		} `json:"resources"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &v))
	return resource.MustParse(v.Resources.Limits[name])
}

// TestAgentResources runs catena-agent run on the host at the worst this
// suite knows: resourceRecords Catena records, all of live sandboxes (a
// fake CRI lists them, so the reconciler reads every one on every pass),
// resourceAdopted entries of the primary in the runtime's libcni cache to
// adopt at start (a node restarted with that many pods), both files of a
// full event journal (about 8 MiB) read at start, and then resourceFlood
// journal lines appended while it runs, with --memory-limit at the chart's
// limit as the DaemonSet passes it. It prints the peak RSS and the CPU
// after each phase, and fails if the peak anonymous RSS reaches half the
// chart's memory limit, or the peak RSS (the binary's text included) the
// limit.
func TestAgentResources(t *testing.T) {
	requireRoot(t)
	n := newAgentNode(t, nil)
	w := n.w
	cniCache := t.TempDir()
	results := filepath.Join(cniCache, "results") // libcni's results dir under its cache dir

	// One real attachment each way: its record, journal line and libcni
	// cache entry are the templates of the copies.
	plain := w.plainList(n.net, "1.0.0", w.bridgeDelegate())
	cni := libcni.NewCNIConfigWithCacheDir([]string{cniPath}, cniCache, nil)
	plainRT := w.rt(w.id+"-plain", nil)
	plainRT.NetNS = w.addNetns(w.id + "-plain")
	_, err := cni.AddNetworkList(bg, plain, plainRT)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, cni.DelNetworkList(bg, plain, plainRT)) })
	catena := w.catenaList(n.net, "1.0.0", w.bridgeDelegate())
	catenaRT := w.rt(w.id+"-catena", nil)
	catenaRT.NetNS = w.addNetns(w.id + "-catena")
	_, err = w.cni.AddNetworkList(bg, catena, catenaRT)
	require.NoError(t, err)
	w.delAtCleanup(catena, catenaRT)
	n.writePrimary(string(plain.Bytes))

	// the copies
	start := time.Now()
	ids := []string{plainRT.ContainerID, catenaRT.ContainerID}
	recDir := filepath.Join(w.cacheDir, "records", n.net)
	recTmpl, err := os.ReadFile(filepath.Join(recDir, catenaRT.ContainerID+":eth0.json"))
	require.NoError(t, err)
	for i := range resourceRecords {
		id := fmt.Sprintf("%s-rec-%05d", w.id, i)
		ids = append(ids, id)
		writeFixture(t, filepath.Join(recDir, id+":eth0.json"), bytes.ReplaceAll(recTmpl, []byte(catenaRT.ContainerID), []byte(id)))
	}
	entries, err := filepath.Glob(filepath.Join(results, n.net+"-"+plainRT.ContainerID+"-*"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "libcni cached the plain ADD")
	entryTmpl, err := os.ReadFile(entries[0])
	require.NoError(t, err)
	for i := range resourceAdopted {
		id := fmt.Sprintf("%s-pod-%03d", w.id, i)
		ids = append(ids, id)
		writeFixture(t, filepath.Join(results, n.net+"-"+id+"-eth0"), bytes.ReplaceAll(entryTmpl, []byte(plainRT.ContainerID), []byte(id)))
	}
	ops, _, err := events.Read(afero.NewOsFs(), w.cacheDir, time.Time{})
	require.NoError(t, err)
	require.NotEmpty(t, ops)
	opTmpl := ops[len(ops)-1]
	journal := &events.Writer{CacheDir: w.cacheDir}
	appendOps := func(prefix string, count int) {
		for i := range count {
			op := opTmpl
			op.Attachment = strings.ReplaceAll(op.Attachment, catenaRT.ContainerID, fmt.Sprintf("%s-%s-%06d", w.id, prefix, i))
			require.NoError(t, journal.Append(op))
		}
	}
	journalPath := events.Path(w.cacheDir)
	for i := 0; !fileExists(journalPath + ".1"); i++ {
		appendOps(fmt.Sprintf("old%03d", i), 1000) // until the journal has rotated once
	}
	for fi, err := os.Stat(journalPath); err == nil && fi.Size() < 3<<20; fi, err = os.Stat(journalPath) {
		appendOps("old-tail", 1000)
	}
	cri := startFakeCRI(t)
	cri.Set(ids...)
	fixtures := time.Since(start)

	limit, cpuLimit := chartLimit(t, "memory"), chartLimit(t, "cpu")
	p := n.spawnRun("--memory-limit", strconv.FormatInt(limit.Value(), 10), // as the DaemonSet sets it
		"--results-dir", results, "--runtime-endpoint", "unix://"+cri.sock, "--reconcile-interval", "3s",
		"--leak-interval", "3s", "--leak-min-age", "0s", "--events=false")
	pid := p.cmd.Process.Pid
	// RSS is mostly the binary's text, file pages the kernel can reclaim;
	// the anonymous part is what an OOM kill is about: sampled every 20 ms
	// for its peak.
	var anonPeak int64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stopSampling:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if a, ok := procStatusKB(pid, "RssAnon:"); ok {
				anonPeak = max(anonPeak, a)
			}
		}
	}()
	type phase struct {
		name  string
		took  time.Duration
		usage agentUsage
	}
	var phases []phase
	mark := func(name string, since time.Time) {
		phases = append(phases, phase{name, time.Since(since), readUsage(t, pid)})
	}
	began := time.Now()
	p.waitReady()
	mark(fmt.Sprintf("start: install, adopt %d, journal of %d MiB read", resourceAdopted, journalMiB(t, w.cacheDir)), began)
	waitMetric := func(what, name string, atLeast float64) {
		waitFor(t, what, 3*time.Minute, 100*time.Millisecond, func() error {
			fams, err := tryScrape("http://" + p.addr + "/metrics")
			if err != nil {
				return err
			}
			if got := sampleSum(fams, name); got < atLeast {
				return fmt.Errorf("%s %v", name, got)
			}
			return nil
		})
	}
	at := time.Now()
	waitMetric("a reconcile pass over the records", "catena_reconcile_passes_total", 1)
	mark(fmt.Sprintf("first reconcile pass over %d records", resourceRecords+1), at)
	at = time.Now()
	waitMetric("a leak scan", "catena_leak_scans_total", 1)
	mark("first leak scan (run with the first pass)", at)
	fams := p.scrape()
	before := sampleSum(fams, "catena_operations_total")
	at = time.Now()
	appendOps("flood", resourceFlood)
	// The journal keeps about 8 MiB: lines rotated away twice between two
	// of the agent's reads are not read. Wait until it has read to the end.
	var counted, last float64
	waitFor(t, "the agent read the flood to the end", 3*time.Minute, time.Second, func() error {
		counted = sampleSum(p.scrape(), "catena_operations_total") - before
		if counted == 0 || counted != last {
			last = counted
			return fmt.Errorf("%v of the flood counted so far", counted)
		}
		return nil
	})
	mark(fmt.Sprintf("%d journal lines appended, %g read", resourceFlood, counted), at)
	at = time.Now()
	waitMetric("two more reconcile passes", "catena_reconcile_passes_total", sampleSum(p.scrape(), "catena_reconcile_passes_total")+2)
	mark("two more passes", at)

	adopted := sampleSum(p.scrape(), "catena_adoptions_total", "result=adopted")
	records, err := os.ReadDir(recDir)
	require.NoError(t, err)
	close(stopSampling)
	<-sampled
	require.Zero(t, p.stop())

	var peak int64
	var table strings.Builder
	fmt.Fprintf(&table, "AGENT-RESOURCES fixtures written in %s; the chart's limits: memory %s, cpu %s\n", fixtures.Round(time.Millisecond), limit.String(), cpuLimit.String())
	for _, ph := range phases {
		peak = max(peak, ph.usage.hwm)
		fmt.Fprintf(&table, "AGENT-RESOURCES %-48s %8s  peak RSS %6.1f MiB  RSS %6.1f MiB (anonymous %6.1f)  CPU %s\n", ph.name, ph.took.Round(time.Millisecond),
			float64(ph.usage.hwm)/1024, float64(ph.usage.rss)/1024, float64(ph.usage.anon)/1024, ph.usage.cpu)
	}
	fmt.Fprintf(&table, "AGENT-RESOURCES peak anonymous RSS %.1f MiB (sampled every 20 ms), peak RSS %.1f MiB, CPU %s in all\n",
		float64(anonPeak)/1024, float64(peak)/1024, phases[len(phases)-1].usage.cpu)
	fmt.Print(table.String())
	assert.Equal(t, float64(resourceAdopted+1), adopted, "every cache entry adopted, the template's too")
	assert.Len(t, records, resourceRecords+1+resourceAdopted+1, "the records, and one per adoption: nothing reclaimed")
	assert.Less(t, anonPeak*1024*2, limit.Value(), "the peak anonymous RSS (%d kB) stays under half the chart's memory limit %s", anonPeak, limit.String())
	assert.Less(t, peak*1024, limit.Value(), "and the peak RSS, the binary's pages included (%d kB), under the limit", peak)
}

// journalMiB is the journal's size, both files.
func journalMiB(t *testing.T, cacheDir string) int64 {
	t.Helper()
	var size int64
	for _, p := range []string{events.Path(cacheDir), events.Path(cacheDir) + ".1"} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		size += fi.Size()
	}
	return size >> 20
}

// writeFixture writes a file of a test's synthetic state, 0600 as Catena's
// own.
func writeFixture(t *testing.T, path string, data []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, data, 0o600))
}
