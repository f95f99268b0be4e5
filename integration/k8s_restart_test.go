package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/catena-cni/catena/tools/nodebench"
)

// nodeRestart reboots the containerd node, as far as one host can, with N
// pods running on flannel's network (the density Deployment; N is
// CATENA_BENCH_NODE_N's last count, 3 in make test), first through Catena
// over flannel, then through flannel alone (Catena uninstalled as the
// density bench does), for the comparison: kubelet stopped, every process
// of every pod killed, containerd and its shims stopped and its state dir
// (a node's /run/containerd, a tmpfs: the pods' netns, the shims' sockets,
// the rootfs mounts) unmounted and removed; what is on disk stays
// (containerd's root, kubelet's dir, Catena's records and journal,
// host-local's reservations, libcni's cache). Then containerd and kubelet
// start again, and kubelet tears down every lost sandbox (a DEL, with no
// netns) and makes a new one for every pod, the agent's included, while
// the agent starts over the node's records and reads its journal.
// Measured: every pod Running again; through Catena, the agent's Ready
// and first pass, and its container's memory and CPU from its cgroup
// (sampled every 50 ms from its creation) against its limits. The node
// then holds exactly one IP, veth and flannel file per pod, and through
// Catena one record.
func (r *k8sRun) nodeRestart(t *testing.T) {
	cfg, err := nodebench.ConfigFromEnv(os.Getenv)
	require.NoError(t, err)
	d := &densityRun{r: r, node: containerdDensity{r}, cfg: cfg, metrics: r.c.httpClient(t)}
	d.setup(t)
	t.Cleanup(func() {
		_, _ = r.c.kubectlErr(nil, "delete", "deployment", densityApp, "-n", "default", "--ignore-not-found")
	})
	n := cfg.Counts[len(cfg.Counts)-1]
	d.switchTo(t, nodebench.Catena)
	c := r.rebootUnder(t, n, true)
	d.switchTo(t, nodebench.Primary)
	p := r.rebootUnder(t, n, false)
	assert.LessOrEqual(t, c.running, 2*p.running+10*time.Second, "pods Running again through Catena in %s, through flannel alone in %s", c.running, p.running)
	summary("node restart", "%d pods on flannel, containerd's state lost and kubelet started again (%s, %s into the reboot): pods Running in new sandboxes %s after through flannel alone, %s through Catena over flannel (%.2f); through Catena, a journal of %d operations: the agent Ready %s after, its first pass %s, settled at %d IPs, %d records %s after (%d DELs of lost sandboxes ok, %d ADDs, %d reclaims); the agent's container: anonymous peak %.1f MiB, usage peak %.1f MiB (limit %d MiB, hit %d times), CPU %.2f s (limit %dm), %g passes, %g libcni entries adopted",
		n, p.kubelet.Round(time.Millisecond), c.kubelet.Round(time.Millisecond), p.running.Round(time.Millisecond), c.running.Round(time.Millisecond),
		float64(c.running)/float64(p.running), c.backlog, c.ready.Round(time.Millisecond), c.firstPass.Round(time.Millisecond), n, n,
		c.settled.Round(time.Millisecond), c.dels, c.adds, c.reclaims, mib(c.peak.rss), mib(c.peak.usage), c.memLimit>>20, c.peak.failcnt,
		c.peak.cpu.Seconds(), c.cpuLimit, c.passes, c.adopted)
}

// restartFigures are one reboot's; the durations after the first are
// from kubelet's start.
type restartFigures struct {
	kubelet          time.Duration // from the reboot's start to kubelet's
	running, settled time.Duration
	ready, firstPass time.Duration // Catena's agent
	backlog          int           // the journal's operations before
	dels, adds       int
	reclaims         int
	peak             cgroupPeak
	memLimit         int64
	cpuLimit         int64 // millicores
	passes, adopted  float64
}

// rebootUnder scales the density Deployment to n, reboots the node under
// its pods (through Catena when catena), checks and measures the node's
// return, and scales it back to 0 until the node holds nothing.
func (r *k8sRun) rebootUnder(t *testing.T, n int, catena bool) restartFigures {
	t.Helper()
	limit := 2*time.Minute + time.Duration(n)*2*time.Second // about 1 s a pod measured on 2 cores
	records := 0
	if catena {
		records = n
	}
	want := flannelHeld{IPs: n, Veths: n, Files: n, Records: records}
	r.c.scale(t, densityApp, n)
	r.waitRunningWithin(t, densityApp, n, limit)
	require.Equal(t, want, r.flannel(t).heldSettled(r.n.cacheDir(), want, 30*time.Second))
	lost := sandboxIDs(r.n.sandboxes(t, densityApp))
	var f restartFigures
	var agentUID, oldAgent string
	if catena {
		f.backlog = len(r.n.ops(t))
		agent := r.c.pods(t, "catena-system", "app.kubernetes.io/component=agent")
		require.Len(t, agent, 1)
		require.Len(t, agent[0].Status.ContainerStatuses, 1)
		agentUID, oldAgent = string(agent[0].UID), agent[0].Status.ContainerStatuses[0].ContainerID
		var ds appsv1.DaemonSet
		require.NoError(t, r.c.getJSON(&ds, "daemonset", "catena-agent", "-n", "catena-system"))
		f.memLimit = ds.Spec.Template.Spec.Containers[0].Resources.Limits.Memory().Value()
		f.cpuLimit = ds.Spec.Template.Spec.Containers[0].Resources.Limits.Cpu().MilliValue()
		require.Positive(t, f.memLimit, "the agent runs with a memory limit")
	}

	start := time.Now()
	r.n.kubelet.stop(30 * time.Second)
	r.n.rebootContainerd(t)
	var cg *containerCgroup
	if catena {
		cg = r.n.watchContainerCgroup(agentUID, "agent")
		t.Cleanup(func() { cg.stop() })
	}
	r.n.restartKubelet(t)
	kubeletUp := time.Now()
	f.kubelet = kubeletUp.Sub(start)

	waitFor(t, fmt.Sprintf("%d pods Running in new sandboxes (and the agent Ready, its first pass done: %t)", n, catena), limit, 250*time.Millisecond, func() error {
		if catena && f.ready == 0 && r.agentReadyOtherThan(t, oldAgent) {
			f.ready = time.Since(kubeletUp)
		}
		if f.ready > 0 && f.firstPass == 0 {
			if m, err := tryScrape(agentMetricsURL); err == nil && sampleSum(m, "catena_reconcile_passes_total") >= 1 {
				f.firstPass = time.Since(kubeletUp)
			}
		}
		if f.running == 0 {
			// the API shows the pods as they were until kubelet's
			// status sync: Running in the new sandboxes is each of
			// them Ready in the runtime, with the IP the API shows
			fresh := r.n.sandboxIPs(t, densityApp, lost)
			ips, err := runningIPs(r.c.pods(t, "default", "app="+densityApp))
			if err != nil {
				return err
			}
			if len(fresh) != n || !sameElements(ips, fresh) {
				return fmt.Errorf("%d new sandboxes Ready %v; pods Running at %v", len(fresh), fresh, ips)
			}
			f.running = time.Since(kubeletUp)
		}
		if catena && (f.ready == 0 || f.firstPass == 0) {
			return fmt.Errorf("the agent Ready %t, its first pass %t", f.ready > 0, f.firstPass > 0)
		}
		return nil
	}, r.n.kubelet)

	// kubelet's StopPodSandbox of each lost sandbox is a DEL: through
	// Catena, the records of the lost sandboxes go with their IPs
	waitFor(t, "the node holds one of each per pod", limit, 250*time.Millisecond, func() error {
		if h := r.flannelHeld(t); h != want {
			return fmt.Errorf("%s", h)
		}
		return nil
	}, r.n.kubelet)
	f.settled = time.Since(kubeletUp)
	if catena {
		r.checkAgentRestart(t, &f, cg, start, lost, n)
	}
	r.c.scale(t, densityApp, 0)
	r.waitGone(t, densityApp)
	r.waitFlannelClean(t, limit)
	return f
}

// checkAgentRestart checks what the agent and Catena did in a reboot
// through Catena, and reads the agent's figures into f.
func (r *k8sRun) checkAgentRestart(t *testing.T, f *restartFigures, cg *containerCgroup, start time.Time, lost []string, n int) {
	t.Helper()
	time.Sleep(3 * time.Second) // a few more samples of the agent's steady state
	f.peak = cg.stop()
	require.NoError(t, f.peak.err, "the agent container's cgroup")
	require.NotEmpty(t, f.peak.dir, "the agent's container was seen in its cgroup")
	st := r.agentStatus(t)
	assert.NotContains(t, st.last, "OOMKilled", "the agent was not OOM-killed by the restart")
	assert.True(t, st.started.After(start), "the agent's process is a new one")
	assert.Less(t, f.peak.rss, f.memLimit/2, "the agent's anonymous memory peak is under half its limit")
	ops := r.n.opsSince(t, start)
	for _, op := range ops {
		if op.Verb == "DEL" && slices.ContainsFunc(lost, func(id string) bool { return strings.Contains(op.Attachment, id) }) {
			assert.Equal(t, "ok", op.Outcome, "the DEL of lost sandbox %s: %s", op.Attachment, op.Error)
			f.dels++
		}
	}
	assert.GreaterOrEqual(t, f.dels, n, "each lost sandbox torn down by a DEL through Catena")
	f.adds = countOps(ops, "ADD", "ok")
	assert.Equal(t, n, f.adds, "one ADD through Catena per pod")
	f.reclaims = countOps(ops, "RECLAIM", "")
	assert.Zero(t, f.reclaims, "kubelet's DELs freed every lost sandbox: nothing was left to reclaim")
	fams := scrapeMetrics(t, agentMetricsURL)
	f.passes = sampleSum(fams, "catena_reconcile_passes_total")
	f.adopted = sampleSum(fams, "catena_adoptions_total", "result=adopted")
	assert.Zero(t, f.adopted, "every attachment in libcni's cache had a record: nothing to adopt")
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// agentReadyOtherThan tells whether the agent's one pod is Ready in a
// container other than old (the API shows the old one Ready until
// kubelet's status sync).
func (r *k8sRun) agentReadyOtherThan(t *testing.T, old string) bool {
	t.Helper()
	pods := r.c.pods(t, "catena-system", "app.kubernetes.io/component=agent")
	if len(pods) != 1 || len(pods[0].Status.ContainerStatuses) != 1 {
		return false
	}
	cs := pods[0].Status.ContainerStatuses[0]
	return cs.ContainerID != old && cs.Ready
}

// sandboxIPs are the IPs of app's sandboxes that the runtime has Ready,
// but for those of skip.
func (n *k8sNode) sandboxIPs(t *testing.T, app string, skip []string) []string {
	t.Helper()
	var ips []string
	for _, s := range n.sandboxes(t, app) {
		if s.State != cri.PodSandboxState_SANDBOX_READY || slices.Contains(skip, s.Id) {
			continue
		}
		st, err := n.runtime().PodSandboxStatus(bg, &cri.PodSandboxStatusRequest{PodSandboxId: s.Id})
		if err != nil || st.Status.GetNetwork().GetIp() == "" {
			continue
		}
		ips = append(ips, st.Status.Network.Ip)
	}
	return ips
}

// sameElements tells whether a and b hold the same strings, in any order.
func sameElements(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// rebootContainerd is a reboot as containerd sees it: every process of
// the node's pods killed, containerd stopped and its shims killed, its
// state dir (/run/containerd on a node: the netns mounts, the shims'
// sockets, the rootfs mounts) unmounted and removed; its root stays.
// containerd starts again on it.
func (n *k8sNode) rebootContainerd(t *testing.T) {
	t.Helper()
	n.loseContainerd(t, "state")
}

// cgroupPeak is what a container's memory and CPU cgroups (v1) showed.
type cgroupPeak struct {
	dir     string // its memory cgroup
	rss     int64  // the highest total_rss sampled
	usage   int64  // memory.max_usage_in_bytes: anonymous and page cache
	failcnt int64  // times the usage hit the limit (the kernel reclaimed)
	cpu     time.Duration
	err     error
}

// containerCgroup samples a container's cgroups from its creation.
type containerCgroup struct {
	once   sync.Once
	cancel context.CancelFunc
	done   chan struct{}
	peak   cgroupPeak
}

// watchContainerCgroup waits in the background for the container name of
// the pod uid to be created (a new one: its ID is not among those the
// runtime lists now), and samples its memory cgroup every 50 ms; stop
// ends it and returns the peaks. The runtime may be down while it starts:
// it retries until stop.
func (n *k8sNode) watchContainerCgroup(uid, name string) *containerCgroup {
	ctx, cancel := context.WithCancel(context.Background())
	c := &containerCgroup{cancel: cancel, done: make(chan struct{})}
	filter := &cri.ListContainersRequest{Filter: &cri.ContainerFilter{LabelSelector: map[string]string{
		"io.kubernetes.pod.uid": uid, "io.kubernetes.container.name": name}}}
	old := map[string]bool{}
	if list, err := n.runtime().ListContainers(ctx, filter); err == nil {
		for _, ct := range list.Containers {
			old[ct.Id] = true
		}
	}
	go func() {
		defer close(c.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if c.peak.dir == "" {
				list, err := n.runtime().ListContainers(ctx, filter)
				if err != nil {
					continue
				}
				for _, ct := range list.Containers {
					if !old[ct.Id] {
						dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/memory", n.cgroupRoot, "kubepods*", "*", "pod"+uid, ct.Id))
						more, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/memory", n.cgroupRoot, "kubepods*", "pod"+uid, ct.Id))
						if dirs = append(dirs, more...); len(dirs) == 1 {
							c.peak.dir = dirs[0]
						}
					}
				}
				if c.peak.dir == "" {
					continue
				}
			}
			if rss, err := memoryStat(c.peak.dir, "total_rss"); err == nil {
				c.peak.rss = max(c.peak.rss, rss)
			}
		}
	}()
	return c
}

// stop ends the sampling and reads the cgroup's own peaks.
func (c *containerCgroup) stop() cgroupPeak {
	c.once.Do(func() {
		c.cancel()
		<-c.done
		if c.peak.dir == "" {
			return
		}
		p := &c.peak
		var err error
		if p.usage, err = readInt(filepath.Join(p.dir, "memory.max_usage_in_bytes")); err != nil {
			p.err = err
			return
		}
		if p.failcnt, err = readInt(filepath.Join(p.dir, "memory.failcnt")); err != nil {
			p.err = err
			return
		}
		rel := strings.TrimPrefix(p.dir, "/sys/fs/cgroup/memory")
		ns, err := readInt(filepath.Join("/sys/fs/cgroup/cpuacct", rel, "cpuacct.usage"))
		if err != nil {
			p.err = err
			return
		}
		p.cpu = time.Duration(ns)
	})
	return c.peak
}

// memoryStat is one field of a v1 memory cgroup's memory.stat.
func memoryStat(dir, field string) (int64, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == field {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no %s in memory.stat", dir, field)
}

func readInt(path string) (int64, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
}
