package integration

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What the Kubernetes components change outside their private dirs (see
// kubeletHostPaths and friends): the harness snapshots it before bring-up,
// removes or restores it at teardown, and checks that the host is as found.

// kubeletHostPaths are dirs a component may create whatever its flags say
// (kubelet's device-plugins dir and container-log symlinks, the flex volume
// dir, the API server's cert dir, kubectl's cache), plus the host's CNI dirs
// that the harness remaps to private ones and must never touch.
var kubeletHostPaths = []string{
	"/var/lib/kubelet", "/var/log/containers", "/var/log/pods", "/usr/libexec/kubernetes",
	"/etc/kubernetes", "/var/run/kubernetes", "/root/.kube",
	"/etc/cni/net.d", "/opt/cni/bin", "/var/lib/cni",
}

// kubeletSysctls are set by kubelet at start-up (protectKernelDefaults off).
var kubeletSysctls = []string{"vm.overcommit_memory", "kernel.panic", "kernel.panic_on_oops"}

// kubeletChains are kubelet's iptables chains, in every table and family.
var kubeletChains = []string{"KUBE-FIREWALL", "KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT"}

var iptablesFamilies = []string{"iptables", "ip6tables"}
var iptablesTables = []string{"filter", "mangle", "nat"}

// hostState is a snapshot of what the components may change on the host.
type hostState struct {
	Paths   map[string][]string // path -> its entries; absent: not there
	Sysctls map[string]string
	Chains  []string // "family/table/chain" of kubeletChains present
	Cgroups []string // hierarchies holding the cluster's cgroupRoot
	Results []string // libcni cache entries of the cluster's networks
}

// hostGuard restores the host after the cluster: cgroupRoot (a top-level
// cgroup name) and the networks whose libcni cache entries are the
// cluster's.
type hostGuard struct {
	t          *testing.T
	cgroupRoot string
	networks   []string
	before     hostState
}

// guardHost snapshots the host. Its cleanup, registered first so that it
// runs after every component has stopped, removes what they added,
// restores what they changed and checks the host against the snapshot.
func guardHost(t *testing.T, cgroupRoot string, networks ...string) *hostGuard {
	t.Helper()
	hostMutex(t)
	g := &hostGuard{t: t, cgroupRoot: cgroupRoot, networks: networks}
	g.before = g.snapshot()
	require.Empty(t, g.before.Cgroups, "cgroup %s already exists", cgroupRoot)
	t.Cleanup(g.restore)
	return g
}

// hostMutex makes test runs on this host take turns: kubelet's chains and
// sysctls are host-wide, and a run that snapshots the host while another
// is still tearing down would keep what the other leaves. The mutex is an
// abstract unix socket (no file on the host), released when the test ends
// or its process dies.
func hostMutex(t *testing.T) {
	t.Helper()
	const name = "@catena-k8s-integration"
	deadline := time.Now().Add(30 * time.Minute)
	for {
		ln, err := net.Listen("unix", name)
		if err == nil {
			t.Cleanup(func() { _ = ln.Close() })
			return
		}
		require.True(t, time.Now().Before(deadline), "another Kubernetes test run holds %s: %v", name, err)
		time.Sleep(time.Second)
	}
}

func (g *hostGuard) snapshot() hostState {
	s := hostState{Paths: map[string][]string{}, Sysctls: map[string]string{}}
	for _, p := range kubeletHostPaths {
		entries, err := os.ReadDir(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		names := []string{}
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if err != nil {
			names = append(names, "(unreadable: "+err.Error()+")")
		}
		s.Paths[p] = names
	}
	for _, k := range kubeletSysctls {
		s.Sysctls[k] = readSysctl(g.t, k)
	}
	for _, fam := range iptablesFamilies {
		for _, table := range iptablesTables {
			for _, c := range iptablesChains(g.t, fam, table) {
				for _, want := range kubeletChains {
					if c == want {
						s.Chains = append(s.Chains, fam+"/"+table+"/"+c)
					}
				}
			}
		}
	}
	for _, h := range cgroupHierarchies(g.t) {
		if _, err := os.Stat(filepath.Join(h, g.cgroupRoot)); err == nil {
			s.Cgroups = append(s.Cgroups, h)
		}
	}
	for _, n := range g.networks {
		m, _ := filepath.Glob(filepath.Join(libcniResults, n+"-*"))
		s.Results = append(s.Results, m...)
	}
	sort.Strings(s.Results)
	return s
}

// makeCgroupRoot creates cgroupRoot in every hierarchy, as kubelet requires
// of cgroupfs, with cpuset's cpus and mems from the parent.
func (g *hostGuard) makeCgroupRoot() {
	g.t.Helper()
	makeCgroupRoot(g.t, g.cgroupRoot)
}

// makeCgroupRoot creates the top-level cgroup name in every hierarchy, with
// cpuset's cpus and mems from the parent; whoever calls it removes it.
func makeCgroupRoot(t *testing.T, name string) {
	t.Helper()
	for _, h := range cgroupHierarchies(t) {
		dir := filepath.Join(h, name)
		require.NoError(t, os.Mkdir(dir, 0o755))
		if filepath.Base(h) != "cpuset" {
			continue
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			v, err := os.ReadFile(filepath.Join(h, f))
			require.NoError(t, err)
			require.NoError(t, writeKernelFile(filepath.Join(dir, f), strings.TrimSpace(string(v))))
		}
	}
}

// restore undoes the components' changes and checks the host.
func (g *hostGuard) restore() {
	g.removeChains()
	for k, v := range g.before.Sysctls {
		if readSysctl(g.t, k) != v {
			if err := writeKernelFile(sysctlPath(k), v); err != nil {
				g.t.Errorf("teardown: restoring %s=%s: %v", k, v, err)
			}
		}
	}
	for _, p := range kubeletHostPaths {
		g.removeAdded(p)
	}
	for _, h := range cgroupHierarchies(g.t) {
		removeCgroupTree(g.t, filepath.Join(h, g.cgroupRoot))
	}
	for _, n := range g.networks {
		m, _ := filepath.Glob(filepath.Join(libcniResults, n+"-*"))
		for _, p := range m {
			if !slices.Contains(g.before.Results, p) {
				_ = os.Remove(p)
			}
		}
	}
	after := g.snapshot()
	assert.Equal(g.t, g.before, after, "the host is left as it was found")
}

// removeAdded removes p if it was not there before, or the entries of p
// that were not.
func (g *hostGuard) removeAdded(p string) {
	old, existed := g.before.Paths[p]
	if !existed {
		if _, err := os.Lstat(p); err == nil {
			unmountUnder(g.t, p)
			if err := os.RemoveAll(p); err != nil {
				g.t.Errorf("teardown: removing %s: %v", p, err)
			}
		}
		return
	}
	entries, _ := os.ReadDir(p)
	for _, e := range entries {
		if !slices.Contains(old, e.Name()) {
			path := filepath.Join(p, e.Name())
			unmountUnder(g.t, path)
			if err := os.RemoveAll(path); err != nil {
				g.t.Errorf("teardown: removing %s: %v", path, err)
			}
		}
	}
}

// removeChains deletes kubelet's chains that were not there before, with
// every jump to them.
func (g *hostGuard) removeChains() {
	for _, fam := range iptablesFamilies {
		for _, table := range iptablesTables {
			present := iptablesChains(g.t, fam, table)
			for _, c := range kubeletChains {
				if !slices.Contains(present, c) || slices.Contains(g.before.Chains, fam+"/"+table+"/"+c) {
					continue
				}
				for _, rule := range iptablesJumpsTo(g.t, fam, table, c) {
					args := append([]string{"-w", "-t", table, "-D"}, rule...)
					if out, err := exec.Command(fam, args...).CombinedOutput(); err != nil {
						g.t.Errorf("teardown: %s %v: %v: %s", fam, args, err, out)
					}
				}
				for _, op := range []string{"-F", "-X"} {
					if out, err := exec.Command(fam, "-w", "-t", table, op, c).CombinedOutput(); err != nil {
						g.t.Errorf("teardown: %s -t %s %s %s: %v: %s", fam, table, op, c, err, out)
					}
				}
			}
		}
	}
}

// iptablesChains lists the chains of a table.
func iptablesChains(t *testing.T, fam, table string) []string {
	t.Helper()
	var chains []string
	for _, line := range iptablesRules(t, fam, table) {
		f := strings.Fields(line)
		if len(f) >= 2 && (f[0] == "-N" || f[0] == "-P") {
			chains = append(chains, f[1])
		}
	}
	return chains
}

// iptablesJumpsTo lists the rules ("CHAIN args...") that jump to chain.
func iptablesJumpsTo(t *testing.T, fam, table, chain string) [][]string {
	t.Helper()
	var rules [][]string
	for _, line := range iptablesRules(t, fam, table) {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "-A" && f[1] != chain && strings.Contains(" "+line+" ", " -j "+chain+" ") {
			rules = append(rules, f[1:])
		}
	}
	return rules
}

// iptablesRules is `fam -S` of a table; a table the kernel lacks is empty.
func iptablesRules(t *testing.T, fam, table string) []string {
	t.Helper()
	out, err := exec.Command(fam, "-w", "-t", table, "-S").Output()
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// cgroupHierarchies lists the cgroup mounts under /sys/fs/cgroup (v1
// controllers, systemd's and the unified one), skipping the symlinks of
// co-mounted controllers.
func cgroupHierarchies(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/sys/fs/cgroup")
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	if len(out) == 0 {
		out = []string{"/sys/fs/cgroup"} // cgroup v2 only
	}
	return out
}

// removeCgroupTree removes a cgroup dir and its children, deepest first
// (cgroup dirs are removed with rmdir, never with their files).
func removeCgroupTree(t *testing.T, dir string) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	for _, e := range entries {
		if e.IsDir() {
			removeCgroupTree(t, filepath.Join(dir, e.Name()))
		}
	}
	if err := syscall.Rmdir(dir); err != nil {
		t.Errorf("teardown: removing cgroup %s: %v", dir, err)
	}
}

func sysctlPath(key string) string {
	return "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
}

func readSysctl(t *testing.T, key string) string {
	t.Helper()
	raw, err := os.ReadFile(sysctlPath(key))
	require.NoError(t, err)
	return strings.TrimSpace(string(raw))
}

// writeKernelFile writes one value to a file of /proc or /sys (not state:
// these files cannot be replaced by a rename).
func writeKernelFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(value); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}
