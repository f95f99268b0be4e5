package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// crioDaemon is one private CRI-O, the runtime of OpenShift: everything it
// writes (storage, state, sockets, namespaces, runc root, logs) under one
// dir of the test's, its network_dir holding the test's conflist, its
// plugin_dirs the test's CNI path. One per test; Cleanup removes every
// sandbox, stops it by PID, kills what it left (containers, conmons),
// unmounts and removes its dirs and its pods' cgroups.
type crioDaemon struct {
	t       *testing.T
	w       *world
	dir     string
	sock    string
	confDir string
	logPath string
	config  string
	cmd     *exec.Cmd
	exited  chan struct{}
	rt      cri.RuntimeServiceClient
	// cgroupParent is the cgroup of the test's pods (cgroupfs), removed at
	// cleanup.
	cgroupParent string
}

// crioBin is where scripts/install-crio.sh builds CRI-O.
func crioBin(name string) string {
	return filepath.Join(repoRoot(), "bin", "crio", name)
}

// requireCRIO fails under CI=true, and skips elsewhere, with the reason,
// when CRI-O or what it runs is missing: `make crio` installs them.
func requireCRIO(t *testing.T) {
	t.Helper()
	var missing []string
	for _, b := range []string{crioBin("crio"), crioBin("pinns"), crioBin("copyimg"), "/usr/bin/conmon", "runc", "iptables-save"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("CRI-O tests need %s (run `make crio`, which runs scripts/install-crio.sh)", strings.Join(missing, ", "))
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + "; CI=true: they must run, not skip")
	}
	t.Skip(msg)
}

// crioConfig is CRI-O's config: a real pause container per sandbox
// (drop_infra_ctr = false, as containerd runs one), cgroupfs, no SELinux,
// AppArmor, hooks, metrics, NRI or tracing; local images only.
var crioConfig = template.Must(template.New("crio").Parse(`[crio]
root = "{{.Dir}}/root"
runroot = "{{.Dir}}/runroot"
storage_driver = "overlay"
log_dir = "{{.Dir}}/pods"
version_file = "{{.Dir}}/run/version"
version_file_persist = "{{.Dir}}/lib/version"
clean_shutdown_file = "{{.Dir}}/lib/clean.shutdown"
[crio.api]
listen = "{{.Dir}}/run/crio.sock"
stream_address = "127.0.0.1"
stream_port = "0"
[crio.runtime]
default_runtime = "runc"
cgroup_manager = "cgroupfs"
selinux = false
apparmor_profile = ""
drop_infra_ctr = false
namespaces_dir = "{{.Dir}}/ns"
container_exits_dir = "{{.Dir}}/run/exits"
container_attach_socket_dir = "{{.Dir}}/run/attach"
pinns_path = "{{.Pinns}}"
hooks_dir = []
default_mounts_file = ""
log_to_journald = false
irqbalance_config_file = ""
irqbalance_config_restore_file = ""
[crio.runtime.runtimes.runc]
runtime_path = "{{.Dir}}/runcwrap"
runtime_type = "oci"
runtime_root = "{{.Dir}}/runc"
monitor_path = "/usr/bin/conmon"
monitor_cgroup = "pod"
monitor_env = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
[crio.image]
pause_image = "{{.Pause}}"
pause_image_auth_file = ""
global_auth_file = ""
signature_policy = "{{.Dir}}/policy.json"
[crio.network]
network_dir = "{{.Dir}}/net.d"
plugin_dirs = [{{.PluginDirs}}]
[crio.metrics]
enable_metrics = false
[crio.nri]
enable_nri = false
[crio.tracing]
enable_tracing = false
`))

// crioSetup is what a test gives its CRI-O besides the default conflist.
type crioSetup struct {
	// files are more network_dir files, by name (sorted after
	// 10-catena-it.conflist, they are not the default network).
	files map[string]string
	// binDirs are CNI bin dirs searched before the test's CNI path.
	binDirs []string
	// binDirsOnly leaves the test's CNI path out of plugin_dirs: binDirs
	// are the node's only CNI bin dirs.
	binDirsOnly bool
	// dir is CRI-O's dir (its socket path must stay short); a temp dir of
	// the test's when empty.
	dir string
	// cgroupParent is the pods' cgroup parent (kubelet's cgroupRoot when
	// kubelet drives CRI-O), removed at cleanup; /catena-it-<world> when
	// empty.
	cgroupParent string
	// sharedNetns makes the dir of the pods' pinned network namespaces a
	// shared mount before CRI-O starts: a container mounting it with
	// HostToContainer propagation (rslave) needs a shared source, as a
	// node's / is.
	sharedNetns bool
	// images are more OCI archives copied into CRI-O's storage, by image
	// name.
	images map[string]string
}

// startCRIO starts a private CRI-O with conflist in its network_dir (the
// first file, so its default network), the local pause image loaded and a
// CRI client ready. It does not wait for the network to be ready
// (waitNetworkReady). Failing to start is a test failure with CRI-O's log,
// never a skip.
func startCRIO(t *testing.T, w *world, conflist string) *crioDaemon {
	t.Helper()
	return startCRIOWith(t, w, conflist, crioSetup{})
}

// startCRIOWith is startCRIO with more network_dir files, CNI bin dirs,
// images and the other settings of setup.
func startCRIOWith(t *testing.T, w *world, conflist string, setup crioSetup) *crioDaemon {
	t.Helper()
	requireCRIO(t)
	dir := setup.dir
	if dir == "" {
		dir = t.TempDir()
	}
	c := &crioDaemon{t: t, w: w, dir: dir, sock: filepath.Join(dir, "run", "crio.sock"),
		confDir: filepath.Join(dir, "net.d"), logPath: filepath.Join(dir, "crio.log"),
		config: filepath.Join(dir, "crio.conf"), cgroupParent: setup.cgroupParent}
	if c.cgroupParent == "" {
		c.cgroupParent = "/catena-it-" + w.id
	}
	require.Less(t, len(c.sock), 100, "CRI-O's socket path must fit a unix socket address: %s", c.sock)
	t.Cleanup(c.removeDir)
	for _, d := range []string{c.confDir, filepath.Join(dir, "conf.d"), filepath.Join(dir, "run"), filepath.Join(dir, "lib")} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	if setup.sharedNetns {
		shareDir(t, c.netnsDir())
	}
	if conflist != "" {
		c.setConflist(conflist)
	}
	for name, data := range setup.files {
		writeAtomic(t, filepath.Join(c.confDir, name), []byte(data))
	}
	binDirs := setup.binDirs
	if !setup.binDirsOnly {
		binDirs = append(binDirs, cniPath)
	}
	dirs := make([]string, 0, len(binDirs))
	for _, d := range binDirs {
		dirs = append(dirs, strconv.Quote(d))
	}
	var cfg bytes.Buffer
	require.NoError(t, crioConfig.Execute(&cfg, map[string]string{"Dir": dir, "Pinns": crioBin("pinns"),
		"Pause": pauseImage, "PluginDirs": strings.Join(dirs, ", ")}))
	writeAtomic(t, c.config, cfg.Bytes())
	writeAtomic(t, filepath.Join(dir, "policy.json"), []byte(`{"default":[{"type":"insecureAcceptAnything"}]}`))
	c.buildRuncWrap()
	c.loadImage(pauseImage, buildPauseImage(t, dir))
	for name, archive := range setup.images {
		c.loadImage(name, archive)
	}

	// The client is closed after stop (cleanups run last-in first-out):
	// stop removes the sandboxes through it.
	conn, err := grpc.NewClient("unix://"+c.sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(callTimeout))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	c.rt = cri.NewRuntimeServiceClient(conn)
	c.start()
	t.Cleanup(c.stop)
	c.waitReady()
	ver, err := c.rt.Version(bg, &cri.VersionRequest{})
	require.NoError(t, err)
	require.Equal(t, "cri-o", ver.RuntimeName)
	return c
}

// netnsDir is where CRI-O's pinns pins the pods' network namespaces
// (namespaces_dir/netns).
func (c *crioDaemon) netnsDir() string { return filepath.Join(c.dir, "ns", "netns") }

// shareDir makes dir a shared mount (a bind mount of itself): the agent
// mounts the netns dir with HostToContainer propagation, which the runtime
// refuses on a private mount, as / is here; on a node, / is shared. The
// mount goes with the unmounts of the dir it is under, at cleanup.
func shareDir(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o711))
	require.NoError(t, syscall.Mount(dir, dir, "", syscall.MS_BIND, ""))
	require.NoError(t, syscall.Mount("", dir, "", syscall.MS_SHARED, ""))
}

// buildRuncWrap builds testdata/runcwrap, CRI-O's runtime_path: runc with
// the spec's oomScoreAdj raised to what this root may set.
func (c *crioDaemon) buildRuncWrap() {
	c.t.Helper()
	runc, err := exec.LookPath("runc")
	require.NoError(c.t, err)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w -X main.runc="+runc,
		"-o", filepath.Join(c.dir, "runcwrap"), "./integration/testdata/runcwrap")
	cmd.Dir = repoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(c.t, err, "building runcwrap: %s", out)
}

// loadImage copies the OCI archive into CRI-O's storage as image name with
// CRI-O's own copyimg: no registry is reachable. The pause image is the
// local one (cri_image_test.go).
func (c *crioDaemon) loadImage(name, archive string) {
	c.t.Helper()
	out, err := exec.Command(crioBin("copyimg"), "--root", filepath.Join(c.dir, "root"),
		"--runroot", filepath.Join(c.dir, "runroot"), "--storage-driver", "overlay",
		"--signature-policy", filepath.Join(c.dir, "policy.json"),
		"--image-name", name, "--import-from", "oci-archive:"+archive).CombinedOutput()
	require.NoError(c.t, err, "copyimg %s: %s", archive, out)
}

// start runs crio in the background, its output appended to the log.
func (c *crioDaemon) start() {
	c.t.Helper()
	logf, err := os.OpenFile(c.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	require.NoError(c.t, err)
	defer func() { _ = logf.Close() }()
	c.cmd = exec.Command(crioBin("crio"), "--config", c.config, "--config-dir", filepath.Join(c.dir, "conf.d"), "--log-level", "info")
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	c.cmd.Env = append(os.Environ(), "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	c.exited = make(chan struct{})
	require.NoError(c.t, c.cmd.Start(), "starting crio")
	exited := c.exited
	cmd := c.cmd
	go func() { _ = cmd.Wait(); close(exited) }()
}

// restart stops crio with sig (its sandboxes live on: conmon and the pause
// processes are not its children) and starts it again on the same dirs.
func (c *crioDaemon) restart(sig syscall.Signal) {
	c.t.Helper()
	require.NoError(c.t, c.cmd.Process.Signal(sig))
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		c.t.Logf("crio %d ignored %v for 30 s; killing it", c.cmd.Process.Pid, sig)
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	c.start()
	c.waitReady()
}

// waitReady waits until the CRI API answers, or crio exits.
func (c *crioDaemon) waitReady() {
	c.t.Helper()
	c.eventually("CRI-O's CRI API answers", time.Minute, func() error {
		_, err := c.rt.Version(bg, &cri.VersionRequest{})
		return err
	})
}

// eventually polls cond every 50ms for up to limit; it fails the test with
// the last error and CRI-O's log if cond never holds or crio exits.
func (c *crioDaemon) eventually(what string, limit time.Duration, cond func() error) {
	c.t.Helper()
	pollDaemon(c.t, "crio", c.exited, c.cmd, c.logTail, what, limit, cond)
}

// log is CRI-O's whole log so far (all its starts).
func (c *crioDaemon) log() string {
	raw, err := os.ReadFile(c.logPath)
	if err != nil {
		return ""
	}
	return string(raw)
}

// logTail is the end of CRI-O's log, for failure messages.
func (c *crioDaemon) logTail() string {
	raw := c.log()
	const max = 8000
	if len(raw) > max {
		raw = raw[len(raw)-max:]
	}
	return "crio log (tail):\n" + raw
}

// waitLog waits until CRI-O's log holds more than n lines containing s,
// and returns how many it holds.
func (c *crioDaemon) waitLog(s string, n int) int {
	c.t.Helper()
	var got int
	c.eventually(fmt.Sprintf("CRI-O logs %q more than %d times", s, n), time.Minute, func() error {
		if got = strings.Count(c.log(), s); got > n {
			return nil
		}
		return fmt.Errorf("%d times", got)
	})
	return got
}

// setConflist atomically replaces the conflist of the network_dir.
func (c *crioDaemon) setConflist(conflist string) {
	c.t.Helper()
	writeAtomic(c.t, filepath.Join(c.confDir, "10-catena-it.conflist"), []byte(conflist))
}

// switchNetwork replaces the conflist with one of network name and waits
// until CRI-O's CNI layer (ocicni, which watches network_dir) has made it
// the default network.
func (c *crioDaemon) switchNetwork(name, conflist string) {
	c.t.Helper()
	line := "Updated default CNI network name to " + name
	before := strings.Count(c.log(), line)
	c.setConflist(conflist)
	c.waitLog(line, before)
}

// stop removes every sandbox left (a failed test may leave some), then
// stops crio by PID: SIGTERM, SIGKILL after 20 s.
func (c *crioDaemon) stop() {
	if c.rt != nil {
		if list, err := c.rt.ListPodSandbox(bg, &cri.ListPodSandboxRequest{}); err == nil {
			for _, sb := range list.GetItems() {
				if _, err := c.rt.StopPodSandbox(bg, &cri.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
					c.t.Logf("cleanup: stop sandbox %s: %v", sb.Id, err)
				}
				if _, err := c.rt.RemovePodSandbox(bg, &cri.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
					c.t.Logf("cleanup: remove sandbox %s: %v", sb.Id, err)
				}
			}
		}
	}
	select {
	case <-c.exited:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(20 * time.Second):
		c.t.Logf("cleanup: crio %d ignored SIGTERM; killing it", c.cmd.Process.Pid)
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// removeDir removes what CRI-O left outside its process: containers runc
// still runs (a sandbox it could not remove), their conmons, libcni's
// cached results of its sandboxes, its pods' cgroups, the mounts under its
// dir (storage, pinned namespaces, shm) and the dir itself (t.TempDir's
// own cleanup, which runs after this one, finds it gone).
func (c *crioDaemon) removeDir() {
	runcRoot := filepath.Join(c.dir, "runc")
	if out, err := exec.Command("runc", "--root", runcRoot, "list", "-q").Output(); err == nil {
		for _, id := range strings.Fields(string(out)) {
			c.t.Logf("cleanup: runc delete --force %s", id)
			if out, err := exec.Command("runc", "--root", runcRoot, "delete", "--force", id).CombinedOutput(); err != nil {
				c.t.Logf("cleanup: runc delete %s: %v: %s", id, err, out)
			}
		}
	}
	killByCmdline(c.t, c.dir+"/", "process of this CRI-O")
	ids := map[string]bool{}
	for _, id := range sandboxIDPattern.FindAllString(c.log(), -1) {
		ids[id] = true
	}
	for id := range ids {
		results, _ := filepath.Glob(filepath.Join(libcniResults, "*-"+id+"-*"))
		for _, r := range results {
			_ = os.Remove(r)
		}
	}
	removeCgroups(c.t, c.cgroupParent)
	removeHostportChains(c.t)
	unmountUnder(c.t, c.dir)
	if err := os.RemoveAll(c.dir); err != nil {
		c.t.Errorf("cleanup: removing CRI-O's dir: %v", err)
	}
}

// killByCmdline kills, by PID, every process but this one whose command
// line contains needle (what names them in the log: a conmon of a CRI-O,
// a shim of a containerd).
func killByCmdline(t *testing.T, needle, what string) {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return
	}
	for _, p := range procs {
		raw, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(raw, []byte(needle)) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err == nil && pid != os.Getpid() {
			t.Logf("cleanup: killing leftover %s %d (%s)", what, pid, bytes.ReplaceAll(raw, []byte{0}, []byte{' '}))
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// removeCgroups removes the cgroup parent (and the cgroups under it,
// deepest first) in every v1 hierarchy and the unified one. rmdir removes
// nothing that still holds a process.
func removeCgroups(t *testing.T, parent string) {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	roots = append(roots, "/sys/fs/cgroup")
	for _, root := range roots {
		top := filepath.Join(root, parent)
		if _, err := os.Stat(top); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Logf("cleanup: %s: %v", dirs[i], err)
			}
		}
	}
}

// crioHostportRules are the nat rules every CRI-O adds at start for the
// hostPorts it maps (KUBE-HOSTPORTS holds a rule per mapped port, removed
// when the sandbox stops; the chains and jumps stay).
var crioHostportRules = [][]string{
	{"PREROUTING", "-m", "comment", "--comment", "kube hostport portals", "-m", "addrtype", "--dst-type", "LOCAL", "-j", "KUBE-HOSTPORTS"},
	{"OUTPUT", "-m", "comment", "--comment", "kube hostport portals", "-m", "addrtype", "--dst-type", "LOCAL", "-j", "KUBE-HOSTPORTS"},
	{"POSTROUTING", "-m", "comment", "--comment", "kube hostport masquerading", "-m", "conntrack", "--ctstate", "DNAT", "-j", "CRIO-HOSTPORTS-MASQ"},
}

// removeHostportChains removes CRI-O's hostport chains and the jumps to
// them from the nat table, unless a CRI-O is still running (another
// test's, in another process).
func removeHostportChains(t *testing.T) {
	procs, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, p := range procs {
		if exe, err := os.Readlink(p); err == nil && filepath.Base(exe) == "crio" {
			t.Logf("cleanup: CRI-O %s still runs: its hostport chains stay", filepath.Dir(p))
			return
		}
	}
	for _, r := range crioHostportRules {
		for range 10 { // each jump once, unless an earlier run left more
			if exec.Command("iptables", append([]string{"-t", "nat", "-D"}, r...)...).Run() != nil {
				break
			}
		}
	}
	for _, chain := range []string{"KUBE-HOSTPORTS", "CRIO-HOSTPORTS-MASQ"} {
		_ = exec.Command("iptables", "-t", "nat", "-F", chain).Run()
		_ = exec.Command("iptables", "-t", "nat", "-X", chain).Run()
	}
}
