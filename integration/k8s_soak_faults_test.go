package integration

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The soak's faults. Those with a window (the delegate's, the full cache
// dir) are in force until their end; the others are one action each.
// Windows of the delegate's faults may overlap: a file in faultDir exists
// while any fault in force wants it.

// soakFlagFaults maps a delegate fault to the files it puts in faultDir
// (failer's faultDir: fail-add, fail-del, hang-add, hang-del, kill-add),
// with what each holds.
var soakFlagFaults = map[string]map[string]string{
	"fail-add":    {"fail-add": ""},
	"fail-del":    {"fail-del": ""},
	"fail-both":   {"fail-add": "", "fail-del": ""},
	"hang-add":    {"hang-add": soakHang.String()},
	"hang-del":    {"hang-del": soakHang.String()},
	"kill-catena": {"kill-add": ""},
}

// soakWindows are each windowed fault's bounds, in seconds.
var soakWindows = map[string][2]float64{
	"fail-add": {10, 35}, "fail-del": {10, 35}, "fail-both": {10, 30},
	"hang-add": {10, 20}, "hang-del": {10, 20}, "kill-catena": {10, 25},
	"cache-full": {10, 30},
}

// soakNodeFaults are the one-action faults.
var soakNodeFaults = []string{"containerd-restart", "containerd-wipe", "kubelet-restart", "agent-delete", "agent-roll"}

// shuffledKinds is every fault kind once, in a random order: each kind is
// injected once before any is injected twice.
func (s *soakRun) shuffledKinds() []string {
	kinds := append([]string{"cache-full"}, soakNodeFaults...)
	for k := range soakFlagFaults {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds) // map order is not the seed's
	s.rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	return kinds
}

// inject starts a fault of kind.
func (s *soakRun) inject(t *testing.T, kind string) {
	r, n := s.r, s.r.n
	s.faults[kind]++
	if w, ok := soakWindows[kind]; ok {
		window := s.between(w[0], w[1])
		until := time.Now().Add(window)
		if until.After(s.active[kind]) {
			s.active[kind] = until
		}
		if kind == "cache-full" {
			s.logf(kind, "filling the cache dir's tmpfs for %s: %s", window.Round(time.Second), s.fill(t))
			return
		}
		s.syncFaultDir(t)
		s.logf(kind, "for %s", window.Round(time.Second))
		return
	}
	start := time.Now()
	switch kind {
	case "containerd-restart":
		n.stopContainerd()
		n.startContainerd(t)
	case "containerd-wipe":
		n.kubelet.stop(30 * time.Second)
		n.wipeContainerd(t, catenaImageArchive(t), r.upgradeArchive)
		n.restartKubelet(t)
	case "kubelet-restart":
		n.restartKubelet(t)
	case "agent-delete":
		s.deleteAgentPod(t)
	case "agent-roll":
		next := s.tags[0]
		if s.tag == next {
			next = s.tags[1]
		}
		r.c.apply(t, s.manifest(t, next))
		s.tag = next
	default:
		t.Fatalf("soak: unknown fault %q", kind)
	}
	s.logf(kind, "done in %s", time.Since(start).Round(time.Millisecond))
}

// deleteAgentPod deletes the agent's pod; the DaemonSet makes another.
func (s *soakRun) deleteAgentPod(t *testing.T) {
	s.r.c.kubectl(t, nil, "delete", "pod", "-n", "catena-system", "-l", "app.kubernetes.io/component=agent", "--wait=false")
}

// endFaults ends the windowed faults whose window has passed.
func (s *soakRun) endFaults(t *testing.T, now time.Time) {
	changed := false
	for kind, until := range s.active {
		if now.Before(until) {
			continue
		}
		delete(s.active, kind)
		if kind == "cache-full" {
			require.NoError(t, os.Remove(s.fillFile))
		}
		s.logf(kind, "ended")
		changed = true
	}
	if changed {
		s.syncFaultDir(t)
	}
}

// syncFaultDir makes faultDir hold exactly the files the delegate faults
// in force want.
func (s *soakRun) syncFaultDir(t *testing.T) {
	want := map[string]string{}
	for kind := range s.active {
		for f, content := range soakFlagFaults[kind] {
			want[f] = content
		}
	}
	for _, f := range []string{"fail-add", "fail-del", "hang-add", "hang-del", "kill-add"} {
		path := filepath.Join(s.faultDir, f)
		if content, ok := want[f]; ok {
			writeAtomic(t, path, []byte(content))
		} else if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			require.NoError(t, err)
		}
	}
}

// stopFaults ends every fault in force: the soak's load stops with them
// and the node is left to converge.
func (s *soakRun) stopFaults(t *testing.T) {
	for kind := range s.active {
		s.active[kind] = time.Time{}
	}
	s.endFaults(t, time.Now())
	require.True(t, s.r.n.containerdRunning(), "containerd runs")
	require.True(t, s.r.n.kubelet.running(), "kubelet runs")
	s.stopped = time.Now()
	s.logf("faults-stopped", "after %s", s.stopped.Sub(s.start).Round(time.Second))
}

// mountCache puts Catena's cache dir on a tmpfs of soakCacheSize, with
// what it held: a tmpfs is mounted beside it, the files are copied, and
// it is bind-mounted over the dir. The node's teardown unmounts it with
// everything under the node's dir.
func (s *soakRun) mountCache(t *testing.T) {
	n := s.r.n
	dir := n.cacheDir()
	require.NoError(t, os.MkdirAll(dir, 0o700))
	staging := filepath.Join(n.dir, "soak-cache")
	require.NoError(t, os.MkdirAll(staging, 0o700))
	require.NoError(t, syscall.Mount("tmpfs", staging, "tmpfs", 0, "size="+strconv.Itoa(soakCacheSize)+",mode=0700"))
	run(t, "cp", "-a", dir+"/.", staging+"/")
	require.NoError(t, syscall.Mount(staging, dir, "", syscall.MS_BIND, ""))
	require.NoError(t, syscall.Unmount(staging, syscall.MNT_DETACH))
	s.fillFile = filepath.Join(dir, "soak-fill")
}

// fill writes the fill file until the tmpfs is full, and says how much
// it wrote.
func (s *soakRun) fill(t *testing.T) string {
	f, err := os.OpenFile(s.fillFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	written := 0
	for _, chunk := range []int{1 << 20, 4 << 10, 512} {
		buf := make([]byte, chunk)
		for {
			n, err := f.Write(buf)
			written += n
			if err != nil {
				require.ErrorIs(t, err, syscall.ENOSPC)
				break
			}
		}
	}
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(s.r.n.cacheDir(), &st))
	return strconv.Itoa(written>>10) + " KiB written, " + strconv.Itoa(int(st.Bavail*uint64(st.Bsize))) + " bytes left"
}
