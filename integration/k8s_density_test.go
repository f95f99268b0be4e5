package integration

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"

	"github.com/catena-cni/catena/deploy"
	"github.com/catena-cni/catena/libchain/events"
	"github.com/catena-cni/catena/tools/nodebench"
)

// The node-density benchmark, on the containerd node on flannel's network
// (scenario node density) or on the CRI-O node on its bridge chain
// (crio density; k8s_density_nodes_test.go has what differs): rounds of
// the primary alone and of Catena installed over it (kubectl apply of
// deploy/catena.yaml, and uninstalled between as deploy/uninstall.yaml
// says), alternating A B B A A B ...; in each, the Deployment density, of
// the local pause image, scaled from 0 to N at once until every pod is
// Ready, then to 0 until every pod is gone and the node holds nothing of
// the network. What it measures and how is tools/nodebench's
// (doc.go); make bench-node sizes it (CATENA_BENCH_NODE_N, _ROUNDS) and
// writes its CSV files and plot into bin/; make test runs one round of
// each variant with 3 pods, into a temp dir. Each round checks what it
// measured: every pod seen through each step in order, kubelet's
// histogram and the runtime's figures counting one start and one CNI
// setup per pod, Catena's journal one ADD per pod in its rounds (and on
// CRI-O a CHECK) and nothing in the primary's.

const densityApp = "density"

// densityRun is one run of the bench.
type densityRun struct {
	r       *k8sRun
	node    densityNode
	cfg     nodebench.Config
	client  kubernetes.Interface
	metrics *http.Client // reaches kubelet's and containerd's endpoints
	rounds  []nodebench.Round
	// installs and uninstalls are how long each switch of the variant took
	installs, uninstalls []time.Duration
}

// nodeDensity runs the bench on the containerd node.
func (r *k8sRun) nodeDensity(t *testing.T) { r.density(t, "node density", containerdDensity{r}) }

// densityOnCRIO runs the bench on the CRI-O node.
func (r *k8sRun) densityOnCRIO(t *testing.T) { r.density(t, "crio density", crioDensity{r}) }

// density runs the bench on node and prints its tables (NODE-DENSITY
// lines) and the scenario's summary line.
func (r *k8sRun) density(t *testing.T, scenario string, node densityNode) {
	cfg, err := nodebench.ConfigFromEnv(os.Getenv)
	require.NoError(t, err)
	if cfg.Out == "" {
		cfg.Out = t.TempDir()
	}
	d := &densityRun{r: r, node: node, cfg: cfg, metrics: r.c.httpClient(t)}
	start := time.Now()
	d.setup(t)
	names := node.names()
	fmt.Printf("%s%s: %s and %s, N %v, %d rounds of each variant, alternated: %v\n", nodebench.Prefix, scenario,
		names.Primary, names.Catena, cfg.Counts, cfg.Rounds, nodebench.Schedule(cfg.Rounds))
	for _, v := range nodebench.Schedule(cfg.Rounds) {
		d.switchTo(t, v)
		for _, n := range cfg.Counts {
			rd := d.round(t, v, n, len(d.rounds))
			d.rounds = append(d.rounds, rd)
			if v == nodebench.Catena && r.n.crio == nil {
				r.densityCatena = &rd
			}
		}
	}
	r.c.kubectl(t, nil, "delete", "deployment", densityApp, "-n", "default")
	if r.n.crio != nil {
		// The node is removed next: uninstall.yaml's removal, measured.
		d.switchTo(t, nodebench.Primary)
	}

	require.NoError(t, nodebench.Report(os.Stdout, d.rounds, names))
	require.NoError(t, nodebench.ReportCPU(os.Stdout, d.rounds, names, 0.01, "catena", "catena-agent"))
	paths, err := nodebench.WriteFiles(cfg.Out, cfg.Docs, node.base(), d.rounds, names)
	require.NoError(t, err)
	for _, p := range paths {
		fmt.Printf("%swrote %s\n", nodebench.Prefix, p)
	}
	n := cfg.Counts[0]
	var p50 [2]time.Duration
	for _, v := range nodebench.Variants {
		s, err := nodebench.Summarize(d.rounds, v, n, nodebench.CreatedReady)
		require.NoError(t, err)
		p50[v] = s.P50
	}
	summary(scenario, "%d rounds of each variant at N=%v on %s; created -> Ready p50 at N=%d: primary %s, Catena %s (%.2f); installs %v, uninstalls %v; %s in all",
		cfg.Rounds, cfg.Counts, names.Primary, n, p50[nodebench.Primary].Round(time.Millisecond), p50[nodebench.Catena].Round(time.Millisecond),
		nodebench.Ratio(p50[nodebench.Catena], p50[nodebench.Primary]), roundAll(d.installs), roundAll(d.uninstalls),
		time.Since(start).Round(time.Second))
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(100 * time.Millisecond)
	}
	return out
}

// setup puts the node on its primary, and makes the Deployment, at 0,
// and the API client of the watches.
func (d *densityRun) setup(t *testing.T) {
	r := d.r
	d.node.prepare(t)
	cp := r.c.controlPlane
	var err error
	d.client, err = kubernetes.NewForConfig(&rest.Config{Host: cp.server(), QPS: 50, Burst: 100,
		TLSClientConfig: rest.TLSClientConfig{CAFile: cp.pki.path("ca.crt"),
			CertFile: cp.pki.path("admin.crt"), KeyFile: cp.pki.path("admin.key")}})
	require.NoError(t, err)
	r.c.apply(t, []any{d.node.deployment()})
}

// switchTo installs or uninstalls Catena, as variant v needs.
func (d *densityRun) switchTo(t *testing.T, v nodebench.Variant) {
	installed := fileExists(filepath.Join(d.r.n.confDir(), generatedName))
	switch {
	case v == nodebench.Catena && !installed:
		d.install(t)
	case v == nodebench.Primary && installed:
		d.uninstall(t)
	}
}

// install is kubectl apply -f deploy/catena.yaml, until the agent is
// Ready and the runtime has loaded the wrapped conflist. The agent is
// told not to remove the conflist when its DaemonSet is deleted
// (CATENA_AGENT_UNINSTALL_ON_DELETE ""), so that uninstall.yaml, the way
// for agents that could not see the deletion, is what removes it.
func (d *densityRun) install(t *testing.T) {
	r := d.r
	objs := r.c.agentManifestOn(t, r.n, deploy.CatenaYAML, r.tag)
	for _, o := range objs {
		if cm, ok := o.(*corev1.ConfigMap); ok && cm.Name == "catena-options" {
			cm.Data["CATENA_AGENT_UNINSTALL_ON_DELETE"] = ""
		}
	}
	start := time.Now()
	r.c.apply(t, objs)
	r.waitAgentReady(t, r.tag)
	r.n.waitNetworkOf(t, d.node.network(), "catena", true)
	d.installs = append(d.installs, time.Since(start))
}

// uninstall is deploy/uninstall.yaml's procedure: the agent's DaemonSet
// deleted and its pod gone (an agent of deploy/catena.yaml's defaults has
// removed the conflist by then; one installed by install has not),
// uninstall.yaml applied until the generated conflist is gone and the
// runtime loaded the primary's own, then both manifests deleted, until
// their namespace is gone.
func (d *densityRun) uninstall(t *testing.T) {
	r := d.r
	// an agent installed by install keeps the conflist; one of
	// deploy/catena.yaml's defaults (flannel install's) removes it
	var cm corev1.ConfigMap
	require.NoError(t, r.c.getJSON(&cm, "configmap", "catena-options", "-n", "catena-system"))
	keepsOnDelete := cm.Data["CATENA_AGENT_UNINSTALL_ON_DELETE"] == ""
	start := time.Now()
	r.c.kubectl(t, nil, "delete", "daemonset", "-n", "catena-system", "catena-agent", "--cascade=foreground", "--wait=false")
	waitFor(t, "the agent's DaemonSet and pod are gone", 2*time.Minute, 250*time.Millisecond, func() error {
		if pods := r.c.pods(t, "catena-system", "app.kubernetes.io/component=agent"); len(pods) > 0 {
			return fmt.Errorf("%d agent pods", len(pods))
		}
		out, err := r.c.kubectlErr(nil, "get", "daemonset", "-n", "catena-system", "catena-agent", "--ignore-not-found", "-o", "name")
		if err == nil && out != "" {
			err = fmt.Errorf("%s still there", strings.TrimSpace(out))
		}
		return err
	}, r.n.kubelet)
	conf := filepath.Join(r.n.confDir(), generatedName)
	if keepsOnDelete {
		require.FileExists(t, conf, "an agent told to keep it leaves the conflist as its DaemonSet is deleted")
	} else {
		require.NoFileExists(t, conf, "the agent of deploy/catena.yaml removed the conflist as its DaemonSet was deleted")
	}
	objs := r.n.nodeManifest(t, deploy.UninstallYAML, r.tag)
	r.c.apply(t, objs)
	waitFor(t, "the uninstall removed the generated conflist", 2*time.Minute, 250*time.Millisecond, func() error {
		if fileExists(filepath.Join(r.n.confDir(), generatedName)) {
			return fmt.Errorf("%s still there", generatedName)
		}
		return nil
	}, r.n.kubelet)
	r.n.waitNetworkOf(t, d.node.network(), "catena", false)
	r.c.deleteObjects(t, append(objs, r.c.agentManifestOn(t, r.n, deploy.CatenaYAML, r.tag)...))
	waitFor(t, "namespace catena-system is gone", 2*time.Minute, 250*time.Millisecond, func() error {
		out, err := r.c.kubectlErr(nil, "get", "namespace", "catena-system", "--ignore-not-found", "-o", "name")
		if err == nil && out != "" {
			err = fmt.Errorf("%s still there", strings.TrimSpace(out))
		}
		return err
	}, r.n.kubelet)
	d.uninstalls = append(d.uninstalls, time.Since(start))
}

// round scales the Deployment to n and back to 0 once, and returns what
// it measured, checked.
func (d *densityRun) round(t *testing.T, v nodebench.Variant, n, index int) nodebench.Round {
	r := d.r
	settled := d.settle(t)
	tr, stop := d.watch(t)
	defer stop()
	s := nodebench.Scrapes{KubeletBefore: d.scrape(t, r.n.kubeletMetricsURL())}
	runtime := d.node.measure(t, d, n)
	since := time.Now()
	var stopPerf func() map[string]float64
	if d.cfg.Perf {
		stopPerf = d.profile(t, fmt.Sprintf("round-%02d-%s-n%d.data", index, v, n))
	}

	limit := 2*time.Minute + time.Duration(n)*3*time.Second
	r.c.scale(t, densityApp, n)
	waitFor(t, fmt.Sprintf("%d pods of %s are Ready", n, densityApp), limit, 100*time.Millisecond, func() error {
		if c := tr.Counts(); c.Ready < n {
			return fmt.Errorf("%d seen, %d Ready", c.Seen, c.Ready)
		}
		return nil
	}, r.n.kubelet)
	r.c.scale(t, densityApp, 0)
	waitFor(t, fmt.Sprintf("the %d pods of %s are gone", n, densityApp), limit, 100*time.Millisecond, func() error {
		if c := tr.Counts(); c.Gone < n {
			return fmt.Errorf("%d seen, %d gone", c.Seen, c.Gone)
		}
		return nil
	}, r.n.kubelet)
	d.node.waitClean(t, limit)
	runtimeDists := runtime(t)
	s.KubeletAfter = d.scrape(t, r.n.kubeletMetricsURL())
	stop()
	var cpu map[string]float64
	if stopPerf != nil {
		cpu = stopPerf()
	}

	pods := tr.Pods()
	require.Len(t, pods, n, "the round's pods, and no other")
	require.Empty(t, tr.Errors(), "the watch's errors")
	for _, p := range pods {
		steps := []time.Time{p.Created, p.Scheduled, p.SandboxReady, p.Ready, p.Deleting, p.Gone}
		for i, at := range steps {
			require.False(t, at.IsZero(), "pod %s: step %d of created, scheduled, sandbox ready, Ready, deleting, gone not seen: %+v", p.Name, i, p)
			if i > 0 {
				require.False(t, at.Before(steps[i-1]), "pod %s: its steps in order: %+v", p.Name, p)
			}
		}
	}
	dists := nodebench.PodDists(pods)
	hists, err := s.HistDists()
	require.NoError(t, err)
	ops, _, err := events.Read(afero.NewOsFs(), r.n.cacheDir(), since)
	require.NoError(t, err)
	maps.Copy(dists, hists)
	maps.Copy(dists, runtimeDists)
	assert.Equal(t, n, hists[nodebench.KubeletStartSLI.ID].Count(), "kubelet's pod start SLI observed each pod once")
	if v == nodebench.Catena {
		maps.Copy(dists, nodebench.JournalDists(ops, densityApp+"-"))
		assert.Equal(t, n, dists[nodebench.CatenaAdd.ID].Count(), "one ADD through Catena per pod")
		assert.GreaterOrEqual(t, dists[nodebench.CatenaDel.ID].Count(), n, "and a DEL")
		d.node.checkJournal(t, dists, n)
	} else {
		assert.Empty(t, ops, "nothing goes through Catena while it is uninstalled")
	}
	load, err := os.ReadFile("/proc/loadavg")
	require.NoError(t, err)
	avg, err := nodebench.ParseLoadAvg(string(load))
	require.NoError(t, err)
	ready, _ := dists[nodebench.CreatedReady.ID].Quantile(0.5)
	fmt.Printf("%sround %d: %s, N=%d: created -> Ready p50 %s; load %.2f; started after %s of settling; journal: %s\n",
		nodebench.Prefix, index, v, n, ready.Round(time.Millisecond), avg, settled.Round(100*time.Millisecond), nodebench.Verbs(ops))
	return nodebench.Round{Variant: v, N: n, Index: index, Pods: pods, Dists: dists, Load: avg, CPU: cpu}
}

// The node is settled when its CPUs were busy less than settleBusy of
// settleWindow; a round waits for that at most settleMax.
const (
	settleBusy   = 0.5
	settleWindow = 2 * time.Second
	settleMax    = 90 * time.Second
)

// settle removes the sandboxes the last rounds' pods left, as kubelet's
// garbage collection would within a minute (each removal a CNI DEL
// through whichever variant is installed then), then waits until the node
// is settled, so that a round neither starts in the tail of the last one
// nor pays for its garbage; it returns how long that took.
func (d *densityRun) settle(t *testing.T) time.Duration {
	start := time.Now()
	for _, sb := range d.r.n.sandboxes(t, densityApp) {
		if sb.State != cri.PodSandboxState_SANDBOX_NOTREADY {
			continue
		}
		_, err := d.r.n.runtime().RemovePodSandbox(bg, &cri.RemovePodSandboxRequest{PodSandboxId: sb.Id})
		if err != nil && !slices.ContainsFunc(d.r.n.sandboxes(t, densityApp), func(s *cri.PodSandbox) bool { return s.Id == sb.Id }) {
			err = nil // kubelet's garbage collection removed it meanwhile (CRI-O: "no such id")
		}
		require.NoError(t, err, "removing the sandbox of %s", sb.Metadata.Name)
	}
	read := func() nodebench.CPUTimes {
		c, err := nodebench.ReadCPUTimes()
		require.NoError(t, err)
		return c
	}
	for prev := read(); ; {
		time.Sleep(settleWindow)
		cur := read()
		if prev.BusyShare(cur) < settleBusy || time.Since(start) > settleMax {
			return time.Since(start)
		}
		prev = cur
	}
}

// profile starts perf recording the whole node into name under the
// output's perf/ directory; the func it returns stops it and returns the
// CPU seconds by command it recorded. perf is stopped at the test's end
// at the latest.
func (d *densityRun) profile(t *testing.T, name string) func() map[string]float64 {
	dir := filepath.Join(d.cfg.Out, "perf")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, name)
	cmd := exec.Command("perf", nodebench.PerfArgs(path)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start(), "perf record (BENCH_NODE_PERF needs perf)")
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGINT)
			_ = cmd.Wait()
		})
	}
	t.Cleanup(stop)
	return func() map[string]float64 {
		stop() // perf exits on SIGINT with its status, or by the signal
		rep, err := exec.Command("perf", nodebench.PerfReportArgs(path)...).Output()
		require.NoError(t, err, "perf report -i %s; perf record said: %s", path, out.String())
		cpu, err := nodebench.ParsePerfComm(bytes.NewReader(rep))
		require.NoError(t, err, "perf report -i %s", path)
		return cpu
	}
}

// watch watches the Deployment's pods from now, each event timestamped on
// receipt into the Tracker; stop ends the watch and its goroutine, and
// runs at the test's end at the latest.
func (d *densityRun) watch(t *testing.T) (*nodebench.Tracker, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pods := d.client.CoreV1().Pods("default")
	selector := "app=" + densityApp
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		cancel()
		require.NoError(t, err)
	}
	require.Empty(t, list.Items, "no pod of %s before the round", densityApp)
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return pods.Watch(ctx, o)
		}})
	if err != nil {
		cancel()
		require.NoError(t, err)
	}
	tr := nodebench.NewTracker()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range rw.ResultChan() {
			tr.Observe(ev, time.Now())
		}
	}()
	stop := sync.OnceFunc(func() {
		rw.Stop()
		cancel()
		<-done
	})
	t.Cleanup(stop)
	return tr, stop
}

// scrape GETs a Prometheus text endpoint and parses it.
func (d *densityRun) scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := d.metrics.Get(url)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode, url)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err, url)
	return fams
}

// deleteObjects deletes typed objects as kubectl delete -f does, those
// already gone ignored, without waiting.
func (c *k8sCluster) deleteObjects(t *testing.T, objs []any) {
	t.Helper()
	var docs []string
	for _, o := range objs {
		raw, err := yaml.Marshal(o)
		require.NoError(t, err)
		docs = append(docs, string(raw))
	}
	c.kubectl(t, []byte(strings.Join(docs, "---\n")), "delete", "-f", "-", "--ignore-not-found", "--wait=false")
}
