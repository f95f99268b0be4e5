package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/catena-cni/catena/deploy"
)

// The chaos soak: pods churned on the Kubernetes node for
// CATENA_SOAK_DURATION (5 minutes in make test, an hour with make soak)
// through Catena wrapping flannel, [flannel, spy, failer, tuning,
// portmap], while random faults are injected from a seed
// (CATENA_SOAK_SEED replays a run's schedule): the delegate failing ADD or
// DEL or hanging, catena killed mid-chain, containerd restarted or wiped,
// kubelet restarted, the agent's pod deleted or rolled, Catena's cache dir
// full. Invariants are checked while it runs and once the node has
// converged, among them, from the spy's log, that no DEL was handed an IP
// another attachment held (k8s_soak_owner_test.go); the figures are
// printed as SOAK lines.

const (
	soakDurationEnv = "CATENA_SOAK_DURATION"
	soakSeedVar     = "CATENA_SOAK_SEED"
	// soakDefaultSeed is make test's: the same schedule on every run
	soakDefaultSeed    = 20261126
	soakDefaultLength  = 5 * time.Minute
	soakReconcileEvery = 10 * time.Second
	soakGrace          = 30 * time.Second
	// soakDelegateTimeout is shorter than the ConfigMap's default so that
	// a hanging delegate is cut within the soak's pace
	soakDelegateTimeout = 20 * time.Second
	// soakHang is how long the hanging delegate sleeps: past the timeout
	soakHang = 30 * time.Second
	// soakCacheSize bounds the tmpfs holding Catena's cache dir, so that
	// it can be filled
	soakCacheSize = 64 << 20
	// soakMinCreationsPerMinute is the load the issue asks for
	soakMinCreationsPerMinute = 10
	// soakConvergeLimit bounds how long the node may take to converge once
	// the faults stop: a record held through a long DEL fault waits out
	// its backoff (at most 5 minutes) before its next retry
	soakConvergeLimit = 7 * time.Minute
	// soakProcBound is how old a catena or delegate process may get: a
	// retrier lingers at most a minute beyond its bounded passes
	soakProcBound = 3 * time.Minute
)

// soakApps are the Deployments the soak scales: plain pods and pods with
// one hostPort each (a Deployment of at most one replica per port, as a
// hostPort allows on one node).
var (
	soakApps      = []string{"soak-a", "soak-b", "soak-c"}
	soakPortApps  = map[string]int32{"soak-hp1": 18081, "soak-hp2": 18082}
	soakMaxScale  = 4
	soakAllApps   = append(append([]string{}, soakApps...), "soak-hp1", "soak-hp2")
	soakChaosFile = "failer-chaos.log"
)

// soakConfig is the run's length and seed, from the environment.
func soakConfig(t *testing.T) (time.Duration, uint64) {
	t.Helper()
	d, seed := soakDefaultLength, uint64(soakDefaultSeed)
	if v := os.Getenv(soakDurationEnv); v != "" {
		var err error
		d, err = time.ParseDuration(v)
		require.NoError(t, err, "%s", soakDurationEnv)
	}
	if v := os.Getenv(soakSeedVar); v != "" {
		var err error
		seed, err = strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "%s", soakSeedVar)
	}
	return d, seed
}

// soakRun is one soak's state.
type soakRun struct {
	r         *k8sRun
	rng       *rand.Rand // the faults' schedule
	loadRng   *rand.Rand // the load's steps: the faults' schedule does not depend on how many ran
	seed      uint64
	length    time.Duration
	faultDir  string
	spyDir    string // the spy's logDir (k8s_soak_owner_test.go)
	fillFile  string
	tag       string // the agent's image tag now
	tags      [2]string
	start     time.Time
	stopped   time.Time     // when the faults stopped
	converged time.Duration // from then until every end invariant held
	log       []soakEvent
	faults    map[string]int
	active    map[string]time.Time // flag and cache faults in force, to their end
	obs       soakObservations
	owner     ownerCheck    // the owner check's last figures
	ownerTook time.Duration // and how long it took
}

// soakEvent is one line of the fault log.
type soakEvent struct {
	at     time.Time
	what   string
	detail string
}

func (s *soakRun) logf(what, format string, args ...any) {
	e := soakEvent{at: time.Now(), what: what, detail: fmt.Sprintf(format, args...)}
	s.log = append(s.log, e)
	fmt.Printf("SOAK-LOG %7.1fs %-18s %s\n", e.at.Sub(s.start).Seconds(), what, e.detail)
}

// soak runs the chaos soak on the flannel node, installing it first when
// the scenarios before it did not (make soak).
func (r *k8sRun) soak(t *testing.T) {
	length, seed := soakConfig(t)
	s := &soakRun{r: r, rng: rand.New(rand.NewPCG(seed, 1)), loadRng: rand.New(rand.NewPCG(seed, 2)), seed: seed, length: length,
		faults: map[string]int{}, active: map[string]time.Time{}}
	s.obs.init()
	fmt.Printf("SOAK seed %d, %s (replay: %s=%d %s=%s make soak)\n", seed, length, soakSeedVar, seed, soakDurationEnv, length)
	s.setup(t)
	s.start = time.Now()
	s.run(t)
	s.stopFaults(t)
	s.converge(t)
	s.report(t)
	s.cleanup(t)
}

// setup brings the node to the soak's start: flannel's conflist with the
// spy (logging to spyDir), failer (driven by faultDir) and tuning,
// Catena's cache dir on a tmpfs of soakCacheSize, Catena installed with
// the soak's ConfigMap and its agent restarted to see the tmpfs, the
// upgrade image there to roll to.
func (s *soakRun) setup(t *testing.T) {
	r := s.r
	n := r.n
	if r.fl == nil { // make soak: the node still runs its first primary
		r.newFlannel(t)
	}
	if r.upgradeArchive == "" {
		r.upgradeArchive, _ = buildUpgradeImage(t, n.dir)
		n.importImage(t, r.upgradeArchive)
	}
	s.tags = [2]string{r.tag, upgradeTag}
	s.tag = r.tag // applied below, whatever the agent ran before
	s.faultDir = filepath.Join(n.cniState, "chaos")
	require.NoError(t, os.MkdirAll(s.faultDir, 0o755))
	// under /var/lib/cni: the agent's container sees it at the same path
	s.spyDir = filepath.Join(n.cniState, "spy")
	require.NoError(t, os.MkdirAll(s.spyDir, 0o755))
	s.mountCache(t)

	installed := fileExists(filepath.Join(n.ctd.confDir, generatedName))
	chaos := failer(fmt.Sprintf(`"faultDir":%q,"logFile":%q`, s.faultDir, filepath.Join(n.dir, soakChaosFile)))
	spy := fmt.Sprintf(`{"type":"spy","logDir":%q}`, s.spyDir)
	r.writeFlannel(t, installed, spy, chaos, `{"type":"tuning"}`)
	if err := os.Remove(filepath.Join(n.ctd.confDir, primaryName)); err != nil && !os.IsNotExist(err) {
		require.NoError(t, err)
	}
	r.c.apply(t, s.manifest(t, s.tag))
	s.deleteAgentPod(t) // it sees the tmpfs and the ConfigMap
	r.waitAgentReady(t, s.tag)
	r.c.waitNetworkOf(t, r.fl.f.net, "catena", true)
	r.c.waitNetworkOf(t, r.fl.f.net, "failer", true)
	for _, app := range soakApps {
		r.c.apply(t, []any{webDeployment(app, 0)})
	}
	for app, port := range soakPortApps {
		d := hostPortDeployment(app, port)
		zero := int32(0)
		d.Spec.Replicas = &zero
		r.c.apply(t, []any{d})
	}
	require.Equal(t, flannelHeld{}, r.flannelHeld(t), "the soak starts on an empty node")
}

// manifest is deploy/catena.yaml for the node at tag, with the soak's
// ConfigMap: a reconcile pass every 10 s, 30 s grace, a 20 s delegate
// timeout.
func (s *soakRun) manifest(t *testing.T, tag string) []any {
	objs := s.r.c.agentManifest(t, deploy.CatenaYAML, tag)
	for _, o := range objs {
		if cm, ok := o.(*corev1.ConfigMap); ok && cm.Name == "catena-options" {
			cm.Data["CATENA_AGENT_RECONCILE_INTERVAL"] = soakReconcileEvery.String()
			cm.Data["CATENA_AGENT_GRACE"] = soakGrace.String()
			cm.Data["CATENA_AGENT_DELEGATE_TIMEOUT"] = soakDelegateTimeout.String()
		}
	}
	return objs
}

// run drives the load and the faults until the soak's length has passed,
// observing the node between steps.
func (s *soakRun) run(t *testing.T) {
	deadline := s.start.Add(s.length)
	kinds := s.shuffledKinds()
	nextLoad := time.Now().Add(time.Second)
	nextFault := time.Now().Add(s.between(8, 15))
	nextObs := time.Now()
	for now := time.Now(); now.Before(deadline); now = time.Now() {
		s.endFaults(t, now)
		if !now.Before(nextFault) {
			if len(kinds) == 0 {
				kinds = s.shuffledKinds()
			}
			s.inject(t, kinds[0])
			kinds = kinds[1:]
			nextFault = time.Now().Add(s.between(12, 28))
		}
		if !now.Before(nextLoad) {
			s.loadStep(t)
			nextLoad = time.Now().Add(time.Duration((1 + 3*s.loadRng.Float64()) * float64(time.Second)))
		}
		if !now.Before(nextObs) {
			s.observe(t)
			nextObs = time.Now().Add(2 * time.Second)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// between is a random duration in [lo, hi) seconds.
func (s *soakRun) between(lo, hi float64) time.Duration {
	return time.Duration((lo + s.rng.Float64()*(hi-lo)) * float64(time.Second))
}

// loadStep is one random change of the load: a Deployment scaled, a
// hostPort Deployment switched on or off, or a running pod deleted.
func (s *soakRun) loadStep(t *testing.T) {
	r := s.r
	switch x := s.loadRng.IntN(10); {
	case x < 5:
		app := soakApps[s.loadRng.IntN(len(soakApps))]
		n := s.loadRng.IntN(soakMaxScale + 1)
		r.c.scale(t, app, n)
		s.obs.scales++
	case x < 7:
		apps := []string{"soak-hp1", "soak-hp2"}
		app := apps[s.loadRng.IntN(len(apps))]
		r.c.scale(t, app, s.loadRng.IntN(2))
		s.obs.scales++
	default:
		pods := s.obs.lastPods
		var names []string
		for _, p := range pods {
			if p.DeletionTimestamp == nil {
				names = append(names, p.Name)
			}
		}
		slices.Sort(names)
		if len(names) == 0 {
			return
		}
		name := names[s.loadRng.IntN(len(names))]
		if out, err := r.c.kubectlErr(nil, "delete", "pod", name, "-n", "default", "--wait=false", "--ignore-not-found"); err != nil {
			t.Logf("soak: deleting pod %s: %v: %s", name, err, out)
			return
		}
		s.obs.deletedPods++
	}
}

// cleanup deletes the soak's Deployments and waits until the node holds
// nothing of flannel's network.
func (s *soakRun) cleanup(t *testing.T) {
	r := s.r
	args := append([]string{"delete", "deployment"}, soakAllApps...)
	r.c.kubectl(t, nil, append(args, "-n", "default", "--wait=false")...)
	for _, app := range soakAllApps {
		r.waitGone(t, app)
	}
	fmt.Printf("SOAK figure     %-34s %d (removed here)\n", "libcni entries containerd forgot", s.forgottenEntries(t))
	r.waitFlannelClean(t, 3*time.Minute)
	r.writeFlannel(t, true)
}

// forgottenEntries removes the runtime's libcni cache entries of flannel's
// network that name no sandbox the runtime knows: the wiped containerd
// lost its sandboxes but not the host's libcni cache, which only its own
// DEL clears (Catena's reclaim leaves the runtime's files alone). It
// returns how many it removed.
func (s *soakRun) forgottenEntries(t *testing.T) int {
	net := s.r.fl.f.net
	entries, err := filepath.Glob(filepath.Join(libcniResults, net+"-*"))
	require.NoError(t, err)
	list, err := s.r.n.ctd.rt.ListPodSandbox(bg, &cri.ListPodSandboxRequest{})
	require.NoError(t, err)
	removed := 0
	for _, e := range entries {
		id := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(e), net+"-"), "-eth0")
		if slices.ContainsFunc(list.Items, func(sb *cri.PodSandbox) bool { return sb.Id == id }) {
			continue
		}
		require.NoError(t, os.Remove(e))
		removed++
	}
	return removed
}
