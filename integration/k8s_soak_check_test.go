package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/catena-cni/catena/libchain/events"
)

// soakObservations is what the soak saw of the node while it ran.
type soakObservations struct {
	seen, gone   map[string]bool // pod UIDs seen in the API, and seen gone
	lastPods     []corev1.Pod
	scales       int
	deletedPods  int
	ops          map[string]events.Op // the journal's, by start, verb and attachment
	suspect      map[string]time.Time // continuous invariant breaks, since first seen
	violations   []string             // breaks that held for soakConfirm
	transient    int                  // breaks that cleared within soakConfirm
	unready      map[string]bool      // pods seen Running, not Ready, without an IP
	observations int
}

// soakConfirm is how long a break of a continuous invariant must hold to
// count: the API's pod status lags the node by a sync period.
const soakConfirm = 6 * time.Second

func (o *soakObservations) init() {
	o.seen, o.gone = map[string]bool{}, map[string]bool{}
	o.ops, o.suspect = map[string]events.Op{}, map[string]time.Time{}
	o.unready = map[string]bool{}
}

// observe lists the pods, counts creations and deletions, checks the
// continuous invariants (no pod Running without an IP, no IP on two Running
// pods) and reads the journal's new ops.
func (s *soakRun) observe(t *testing.T) {
	o := &s.obs
	pods := s.r.c.pods(t, "default", "app")
	o.lastPods = pods
	o.observations++
	now := map[string]bool{}
	for _, p := range pods {
		uid := string(p.UID)
		now[uid], o.seen[uid] = true, true
	}
	for uid := range o.seen {
		if !now[uid] {
			o.gone[uid] = true
		}
	}
	breaks := map[string]bool{}
	byIP := map[string][]string{}
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		if p.Status.PodIP == "" {
			// kubelet keeps a pod whose sandbox is gone (containerd wiped)
			// in phase Running (restartPolicy Always) until its new one
			// has an IP, not Ready meanwhile: a Ready pod has an IP
			if podReady(p) {
				breaks["pod "+p.Name+" Running and Ready without an IP"] = true
			} else {
				o.unready[p.Name] = true
			}
			continue
		}
		byIP[p.Status.PodIP] = append(byIP[p.Status.PodIP], p.Name)
	}
	for ip, names := range byIP {
		if len(names) > 1 {
			slices.Sort(names)
			breaks[fmt.Sprintf("IP %s on %d Running pods: %s", ip, len(names), strings.Join(names, ", "))] = true
		}
	}
	for b, since := range o.suspect {
		switch {
		case !breaks[b]:
			delete(o.suspect, b)
			o.transient++
		case time.Since(since) >= soakConfirm && !slices.Contains(o.violations, b):
			o.violations = append(o.violations, b)
			s.logf("VIOLATION", "%s (since %.1fs)", b, since.Sub(s.start).Seconds())
		}
	}
	for b := range breaks {
		if _, ok := o.suspect[b]; !ok {
			o.suspect[b] = time.Now()
		}
	}
	if o.observations%5 == 0 {
		s.readOps(t)
	}
}

// podReady tells whether p's Ready condition is True.
func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// readOps adds the journal's ops since the soak began (the journal
// rotates: it is read as the soak goes).
func (s *soakRun) readOps(t *testing.T) {
	ops, _, err := events.Read(afero.NewOsFs(), s.r.n.cacheDir(), s.start)
	require.NoError(t, err)
	for _, op := range ops {
		s.obs.ops[op.Start.Format(time.RFC3339Nano)+" "+op.Verb+" "+op.Attachment] = op
	}
}

// soakInvariant is one end invariant, its value and whether it holds.
// A final one is about what happened: once broken, it stays broken.
type soakInvariant struct {
	name, value string
	ok, final   bool
}

// invariants checks the node against the pods that run.
func (s *soakRun) invariants(t *testing.T) []soakInvariant {
	r := s.r
	var inv []soakInvariant
	add := func(name string, ok bool, format string, args ...any) {
		inv = append(inv, soakInvariant{name: name, value: fmt.Sprintf(format, args...), ok: ok})
	}
	pods := r.c.pods(t, "default", "app")
	stuck, running := 0, 0
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			stuck++
		} else {
			running++
		}
	}
	want := s.wantedReplicas(t)
	add("pods Running == replicas", running == want && stuck == 0, "%d Running of %d wanted, %d not Running or Terminating", running, want, stuck)

	sandboxes, hostPort := s.readySandboxes(t)
	fl := r.flannel(t)
	ids := func(list []string) string { return fmt.Sprintf("%d", len(list)) }
	holders := fl.ipHolders()
	add("IPs held == pods", sameSet(holders, sandboxes), "%s IPs for %d sandboxes%s", ids(holders), len(sandboxes), diff(holders, sandboxes))
	veths := len(bridgePorts(t, fl.bridge))
	add("veths == pods", veths == len(sandboxes), "%d veths for %d sandboxes", veths, len(sandboxes))
	files := fl.cacheFiles()
	add("flannel files == pods", sameSet(files, sandboxes), "%s files%s", ids(files), diff(files, sandboxes))
	recs := s.records(t)
	add("records == pods", sameSet(recs, sandboxes), "%s records%s", ids(recs), diff(recs, sandboxes))
	pending, quarantined := s.countFiles(t, "pending", fl.net), s.countFiles(t, "quarantine", "")
	add("pending teardowns == 0", pending == 0, "%d", pending)
	add("quarantined == 0", quarantined == 0, "%d", quarantined)
	dnat := dnatIDs(t, fl.net)
	add("DNAT only for running hostPorts", sameSet(dnat, hostPort), "%d containers with DNAT rules, %d hostPort sandboxes%s", len(dnat), len(hostPort), diff(dnat, hostPort))
	old := oldProcs(t, soakProcBound, "catena", "failer", "spy", "flannel", "bridge", "host-local", "portmap", "tuning", "loopback")
	add("no plugin process past its bound", len(old) == 0, "%d older than %s %v", len(old), soakProcBound, old)
	shims, all := s.shims(t), s.allReadySandboxes(t)
	add("shims == ready sandboxes", shims == all, "%d shims, %d ready sandboxes (all namespaces)", shims, all)
	return append(inv, s.ownerInvariant(t))
}

// wantedReplicas is the sum of the soak's Deployments' replicas, from one
// list of the namespace's Deployments.
func (s *soakRun) wantedReplicas(t *testing.T) int {
	var list appsv1.DeploymentList
	require.NoError(t, s.r.c.getJSON(&list, "deployments", "-n", "default"))
	total, found := 0, 0
	for _, d := range list.Items {
		if slices.Contains(soakAllApps, d.Name) {
			require.NotNil(t, d.Spec.Replicas, "replicas of %s", d.Name)
			total += int(*d.Spec.Replicas)
			found++
		}
	}
	require.Equal(t, len(soakAllApps), found, "the soak's Deployments")
	return total
}

// readySandboxes are the IDs of the soak's ready sandboxes, and of those
// with a hostPort.
func (s *soakRun) readySandboxes(t *testing.T) (all, hostPort []string) {
	for _, app := range soakAllApps {
		for _, sb := range s.r.n.sandboxes(t, app) {
			if sb.State != cri.PodSandboxState_SANDBOX_READY {
				continue
			}
			all = append(all, sb.Id)
			if _, ok := soakPortApps[app]; ok {
				hostPort = append(hostPort, sb.Id)
			}
		}
	}
	return all, hostPort
}

// allReadySandboxes counts the runtime's ready sandboxes of every pod.
func (s *soakRun) allReadySandboxes(t *testing.T) int {
	list, err := s.r.n.ctd.rt.ListPodSandbox(bg, &cri.ListPodSandboxRequest{Filter: &cri.PodSandboxFilter{
		State: &cri.PodSandboxStateValue{State: cri.PodSandboxState_SANDBOX_READY}}})
	require.NoError(t, err)
	return len(list.Items)
}

// shims counts the shim processes of the node's containerd.
func (s *soakRun) shims(t *testing.T) int {
	count := 0
	for _, p := range procs(t) {
		if strings.HasPrefix(p.comm, "containerd-shim") && strings.Contains(p.cmdline, s.r.n.ctd.sock) {
			count++
		}
	}
	return count
}

// records are the container IDs of Catena's records of flannel's network.
func (s *soakRun) records(t *testing.T) []string {
	recs, err := filepath.Glob(filepath.Join(s.r.n.cacheDir(), "records", s.r.fl.f.net, "*.json"))
	require.NoError(t, err)
	var ids []string
	for _, r := range recs {
		id, _, _ := strings.Cut(filepath.Base(r), ":")
		ids = append(ids, id)
	}
	return ids
}

// countFiles counts the regular files under the cache dir's sub/net (the
// dot files, a network's retry stamp, are not entries).
func (s *soakRun) countFiles(t *testing.T, sub, net string) int {
	entries, err := os.ReadDir(filepath.Join(s.r.n.cacheDir(), sub, net))
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	c := 0
	for _, e := range entries {
		if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") {
			c++
		}
	}
	return c
}

var dnatID = regexp.MustCompile(`dnat name: \\"([^\\"]+)\\" id: \\"([0-9a-f]+)\\"`)

// dnatIDs are the containers that portmap's DNAT rules of net name.
func dnatIDs(t *testing.T, net string) []string {
	seen := map[string]bool{}
	for _, m := range dnatID.FindAllStringSubmatch(run(t, "iptables-save", "-t", "nat"), -1) {
		if m[1] == net {
			seen[m[2]] = true
		}
	}
	var ids []string
	for id := range seen {
		ids = append(ids, id)
	}
	return ids
}

// proc is one process of the host.
type proc struct {
	pid           int
	comm, cmdline string
	age           time.Duration
}

// procs lists the host's processes with their age.
func procs(t *testing.T) []proc {
	var list []proc
	out := run(t, "ps", "-e", "-o", "pid=,etimes=,comm=,args=")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		pid, err1 := strconv.Atoi(f[0])
		secs, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil {
			continue
		}
		list = append(list, proc{pid: pid, comm: f[2], cmdline: strings.Join(f[3:], " "), age: time.Duration(secs) * time.Second})
	}
	return list
}

// oldProcs are the processes named comms older than bound.
func oldProcs(t *testing.T, bound time.Duration, comms ...string) []string {
	var old []string
	for _, p := range procs(t) {
		if slices.Contains(comms, p.comm) && p.age > bound {
			old = append(old, fmt.Sprintf("%d %s (%s): %s", p.pid, p.comm, p.age, p.cmdline))
		}
	}
	return old
}

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(slices.Compact(x), slices.Compact(y)) && len(a) == len(b)
}

// diff names what a has that b lacks and the reverse, or "".
func diff(a, b []string) string {
	var extra, missing []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			extra = append(extra, short(x))
		}
	}
	for _, y := range b {
		if !slices.Contains(a, y) {
			missing = append(missing, short(y))
		}
	}
	if len(extra)+len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf(" (extra %v, missing %v)", extra, missing)
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// converge waits grace and two reconcile passes after the faults stopped,
// then until every end invariant holds, and fails with the evidence if
// they do not within soakConvergeLimit.
func (s *soakRun) converge(t *testing.T) {
	time.Sleep(soakGrace + 2*soakReconcileEvery)
	var inv []soakInvariant
	for {
		s.observe(t)
		inv = s.invariants(t)
		if !slices.ContainsFunc(inv, func(i soakInvariant) bool { return !i.ok }) {
			break
		}
		final := slices.ContainsFunc(inv, func(i soakInvariant) bool { return !i.ok && i.final })
		if final || time.Since(s.stopped) > soakConvergeLimit {
			s.readOps(t)
			s.printInvariants(inv)
			why := fmt.Sprintf("the node did not converge within %s of the faults stopping", soakConvergeLimit)
			if final { // waiting cannot mend it
				why = "an invariant of the run's history is broken"
			}
			t.Fatalf("soak (seed %d): %s:\n%s\nfault log:\n%s\nrecords:\n%s",
				s.seed, why, failing(inv), s.logAround(time.Now(), soakConvergeLimit+s.length), s.recordsDump(t))
		}
		time.Sleep(5 * time.Second)
	}
	s.converged = time.Since(s.stopped)
	s.readOps(t)
	s.printInvariants(inv)
}

func failing(inv []soakInvariant) string {
	var b strings.Builder
	for _, i := range inv {
		if !i.ok {
			fmt.Fprintf(&b, "  %s: %s\n", i.name, i.value)
		}
	}
	return b.String()
}

func (s *soakRun) printInvariants(inv []soakInvariant) {
	for _, i := range inv {
		mark := "ok"
		if !i.ok {
			mark = "BROKEN"
		}
		fmt.Printf("SOAK invariant  %-34s %-6s %s\n", i.name, mark, i.value)
	}
}

// logAround is the fault log from span before at to 30 s after.
func (s *soakRun) logAround(at time.Time, span time.Duration) string {
	var b strings.Builder
	for _, e := range s.log {
		if e.at.After(at.Add(-span)) && e.at.Before(at.Add(30*time.Second)) {
			fmt.Fprintf(&b, "  %7.1fs %-18s %s\n", e.at.Sub(s.start).Seconds(), e.what, e.detail)
		}
	}
	return b.String()
}

// recordsDump names Catena's records, pending teardowns and quarantined
// files (catenactl list shows them whole).
func (s *soakRun) recordsDump(t *testing.T) string {
	var b strings.Builder
	for _, sub := range []string{"records", "pending", "quarantine"} {
		_ = filepath.WalkDir(filepath.Join(s.r.n.cacheDir(), sub), func(path string, e os.DirEntry, err error) error {
			if err != nil || !e.Type().IsRegular() {
				return nil
			}
			fmt.Fprintf(&b, "  %s\n", strings.TrimPrefix(path, s.r.n.cacheDir()+"/"))
			return nil
		})
	}
	return b.String()
}

// report prints the soak's figures and fails on a continuous invariant
// broken or a load below the issue's.
func (s *soakRun) report(t *testing.T) {
	o := &s.obs
	converged := s.converged
	minutes := s.length.Minutes()
	perMin := float64(len(o.seen)) / minutes
	fmt.Printf("SOAK figure     %-34s %s\n", "seed", strconv.FormatUint(s.seed, 10))
	fmt.Printf("SOAK figure     %-34s %s of load and faults\n", "duration", s.length)
	fmt.Printf("SOAK figure     %-34s %d (%.1f a minute)\n", "pods created", len(o.seen), perMin)
	fmt.Printf("SOAK figure     %-34s %d (%d deleted by the soak, %d scale steps)\n", "pods deleted", len(o.gone), o.deletedPods, o.scales)
	counts := map[string]int{}
	for _, op := range o.ops {
		counts[op.Verb+" "+op.Outcome]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("SOAK figure     %-34s %d\n", "CNI calls "+k, counts[k])
	}
	kinds := make([]string, 0, len(s.faults))
	for k := range s.faults {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Printf("SOAK figure     %-34s %d\n", "faults "+k, s.faults[k])
	}
	for _, line := range []struct{ what, prefix string }{
		{"delegate ADD failed (injected)", "ADD-FAILED "}, {"delegate DEL failed (injected)", "DEL-FAILED "},
		{"catena killed mid-chain", "ADD-KILLED-PARENT "},
	} {
		fmt.Printf("SOAK figure     %-34s %d\n", line.what, s.chaosLines(t, line.prefix))
	}
	fmt.Printf("SOAK figure     %-34s %d\n", "retries (RETRY)", countVerb(o.ops, "RETRY"))
	fmt.Printf("SOAK figure     %-34s %d\n", "reclaims (RECLAIM)", countVerb(o.ops, "RECLAIM"))
	fmt.Printf("SOAK figure     %-34s %s after the faults stopped\n", "converged", converged.Round(time.Second))
	fmt.Printf("SOAK figure     %-34s %d confirmed, %d cleared within %s\n", "continuous invariants broken", len(o.violations), o.transient, soakConfirm)
	fmt.Printf("SOAK figure     %-34s %d (sandbox being recreated)\n", "pods Running, not Ready, no IP", len(o.unready))
	fmt.Printf("SOAK figure     %-34s %d ADD, %d DEL, %d CHECK of %d attachments; %d ADDs of a held IP; checked in %s\n", "spy calls",
		s.owner.adds, s.owner.dels, s.owner.checks, s.owner.attachments, s.owner.overlaps, s.ownerTook.Round(time.Millisecond))
	summary("soak", "seed %d, %s: %d pods created (%.1f/min), %d faults, converged %s after they stopped, %d invariants broken",
		s.seed, s.length, len(o.seen), perMin, sum(s.faults), converged.Round(time.Second), len(o.violations))
	if len(o.violations) > 0 {
		t.Errorf("soak (seed %d): continuous invariants broken:\n  %s\nfault log:\n%s\nrecords:\n%s", s.seed,
			strings.Join(o.violations, "\n  "), s.logAround(time.Now(), s.length+time.Hour), s.recordsDump(t))
	}
	assert.GreaterOrEqual(t, perMin, float64(soakMinCreationsPerMinute), "the soak's load: pod creations a minute")
}

// chaosLines counts the lines of failer's log (the chain's chaos delegate)
// that start with prefix.
func (s *soakRun) chaosLines(t *testing.T, prefix string) int {
	raw, err := os.ReadFile(filepath.Join(s.r.n.dir, soakChaosFile))
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	c := 0
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, prefix) {
			c++
		}
	}
	return c
}

func countVerb(ops map[string]events.Op, verb string) int {
	c := 0
	for _, op := range ops {
		if op.Verb == verb {
			c++
		}
	}
	return c
}

func sum(m map[string]int) int {
	total := 0
	for _, v := range m {
		total += v
	}
	return total
}
