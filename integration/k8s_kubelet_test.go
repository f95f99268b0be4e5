package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// k8sNode is a node of the cluster: its runtime with private dirs
// (containerd 2.4, its metrics endpoint on 127.0.0.1, on the cluster's
// node; CRI-O on the CRI-O node of k8s_crio_node_test.go), a private CNI
// bin dir (the reference plugins, flannel and failer), the conf dir the
// runtime watches, and a kubelet registered as a node, its server on
// 127.0.0.1 only (for its /metrics).
type k8sNode struct {
	name       string
	dir        string
	cgroupRoot string
	w          *world      // the primary's bridge, subnet and host-local dir
	net        string      // the primary's network name
	fw         *world      // flannel's bridge and subnet (k8s_flannel_test.go)
	ctd        *containerd // the runtime: containerd, or
	crio       *crioDaemon // CRI-O
	cniBin     string
	cniState   string // remaps /var/lib/cni; results/ is the host's libcni cache, bind-mounted
	kubelet    *daemon
	kubeletCmd []string
	// kubeletPort is kubelet's server's, on the node's address ip (the
	// API server's kubectl exec reaches it there): TLS with the cluster's
	// CA, client certificates of that CA only
	kubeletPort int
	ip          string
	pki         *k8sPKI
}

// cacheDir is Catena's cacheDir on this node (the manifest's
// /var/lib/cni/catena, remapped).
func (n *k8sNode) cacheDir() string { return filepath.Join(n.cniState, "catena") }

// makeCNIDirs makes the node's CNI bin dir and remapped /var/lib/cni. The
// host's libcni cache is bind-mounted into the latter, where the agent
// looks for the attachments to adopt: containerd's go-cni writes there
// whatever its config says.
func (n *k8sNode) makeCNIDirs(t *testing.T) {
	t.Helper()
	n.cniBin = filepath.Join(n.dir, "cni-bin")
	n.cniState = filepath.Join(n.dir, "cni-state")
	require.NoError(t, os.MkdirAll(n.cniBin, 0o755))
	// copies, not symlinks: the agent's reconciler runs them in its
	// container, where only this dir is mounted
	requireFlannel(t)
	for _, p := range []string{"bridge", "host-local", "portmap", "tuning", "loopback", "failer", "spy", "flannel"} {
		copyExecutable(t, filepath.Join(cniPath, p), filepath.Join(n.cniBin, p))
	}
	// host-local's dataDir where a node has it, in /var/lib/cni: the
	// agent's reclaims release IPs there
	n.w.ipamDir = filepath.Join(n.cniState, "networks")
	if n.fw != nil {
		n.fw.ipamDir = n.w.ipamDir
	}
	results := filepath.Join(n.cniState, "results")
	require.NoError(t, os.MkdirAll(results, 0o700))
	require.NoError(t, os.MkdirAll(libcniResults, 0o700))
	require.NoError(t, syscall.Mount(libcniResults, results, "", syscall.MS_BIND, ""))
}

// copyExecutable copies an executable file (a test fixture, not state).
func copyExecutable(t *testing.T, src, dst string) {
	t.Helper()
	raw, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dst, raw, 0o755))
}

// primary is the node's primary conflist [bridge + host-local, portmap,
// tuning], with extra plugins after bridge.
func (n *k8sNode) primary(extra ...string) string {
	plugins := append([]string{n.w.bridgeDelegate()}, extra...)
	plugins = append(plugins, portmapDelegate, `{"type":"tuning"}`)
	return fmt.Sprintf(`{"cniVersion":%q,"name":%q,"plugins":[%s]}`, n.cniVersion(), n.net, strings.Join(plugins, ","))
}

// cniVersion is the newest CNI version the node's runtime speaks (CRI-O
// 1.34's libcni 1.3 speaks 1.1.0).
func (n *k8sNode) cniVersion() string {
	if n.crio != nil {
		return "1.1.0"
	}
	return n.ctd.version.cniVersion()
}

// confDir is the CNI conf dir the node's runtime watches.
func (n *k8sNode) confDir() string {
	if n.crio != nil {
		return n.crio.confDir
	}
	return n.ctd.confDir
}

// runtime is the CRI runtime service of the node's runtime.
func (n *k8sNode) runtime() cri.RuntimeServiceClient {
	if n.crio != nil {
		return n.crio.rt
	}
	return n.ctd.rt
}

// endpoint is the node's runtime's CRI socket as kubelet names it.
func (n *k8sNode) endpoint() string {
	if n.crio != nil {
		return "unix://" + n.crio.sock
	}
	return "unix://" + n.ctd.sock
}

// writePrimary atomically (re)writes the primary's file.
func (n *k8sNode) writePrimary(t *testing.T, conf string) {
	t.Helper()
	writeAtomic(t, filepath.Join(n.confDir(), primaryName), []byte(conf))
}

// kubeletConfig is the KubeletConfiguration: everything private, cgroupfs
// under cgroupRoot, its server on 127.0.0.1 (the API server, which reaches
// a kubelet at the node's address, cannot), quick sync.
func (n *k8sNode) kubeletConfig() map[string]any {
	// client certificates of the cluster's CA, any of them allowed
	authn := map[string]any{"x509": map[string]any{"clientCAFile": n.pki.path("ca.crt")},
		"anonymous": map[string]any{"enabled": false}, "webhook": map[string]any{"enabled": false}}
	return map[string]any{
		"apiVersion":                  "kubelet.config.k8s.io/v1beta1",
		"kind":                        "KubeletConfiguration",
		"staticPodPath":               filepath.Join(n.dir, "manifests"),
		"fileCheckFrequency":          "2s",
		"syncFrequency":               "5s",
		"containerRuntimeEndpoint":    n.endpoint(),
		"cgroupDriver":                "cgroupfs",
		"cgroupRoot":                  "/" + n.cgroupRoot,
		"failCgroupV1":                false,
		"failSwapOn":                  false,
		"enableServer":                true,
		"address":                     n.ip,
		"port":                        n.kubeletPort,
		"tlsCertFile":                 n.pki.path("kubelet-serving.crt"),
		"tlsPrivateKeyFile":           n.pki.path("kubelet-serving.key"),
		"readOnlyPort":                0,
		"healthzPort":                 0,
		"authentication":              authn,
		"authorization":               map[string]any{"mode": "AlwaysAllow"},
		"podLogsDir":                  filepath.Join(n.dir, "podlogs"),
		"volumePluginDir":             filepath.Join(n.dir, "volume-plugins"),
		"evictionHard":                map[string]string{"memory.available": "100Mi"},
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"nodeStatusUpdateFrequency":   "2s",
		// the node restart's full run (150 pods) is past the default 110
		"maxPods": 250,
	}
}

// startKubelet writes kubelet's config and starts it, registered as the
// node with the kubeconfig given.
func (n *k8sNode) startKubelet(t *testing.T, bins, kubeconfig string) {
	t.Helper()
	for _, d := range []string{"manifests", "podlogs", "volume-plugins", "kubelet"} {
		require.NoError(t, os.MkdirAll(filepath.Join(n.dir, d), 0o755))
	}
	n.ip = advertiseIP(t).String()
	raw, err := json.MarshalIndent(n.kubeletConfig(), "", "  ")
	require.NoError(t, err)
	cfg := filepath.Join(n.dir, "kubelet.json")
	writeAtomic(t, cfg, raw)
	n.kubeletCmd = []string{filepath.Join(bins, "kubelet"),
		"--config=" + cfg, "--kubeconfig=" + kubeconfig,
		"--root-dir=" + filepath.Join(n.dir, "kubelet"), "--cert-dir=" + filepath.Join(n.dir, "kubelet-pki"),
		"--hostname-override=" + n.name, "--node-ip=" + n.ip, "--v=2"}
	n.kubelet = startDaemon(t, filepath.Join(n.dir, "logs"), "kubelet", n.kubeletCmd[0], n.kubeletCmd[1:]...)
}

// kubeletMetricsURL is kubelet's /metrics; cp.httpClient reaches it.
func (n *k8sNode) kubeletMetricsURL() string {
	return "https://" + net.JoinHostPort(n.ip, strconv.Itoa(n.kubeletPort)) + "/metrics"
}

// containerdMetricsURL is containerd's /v1/metrics.
func (n *k8sNode) containerdMetricsURL() string {
	return "http://" + n.ctd.version.metrics + "/v1/metrics"
}

// restartKubelet stops kubelet by PID and starts it again, same flags.
func (n *k8sNode) restartKubelet(t *testing.T) {
	t.Helper()
	n.kubelet.stop(30 * time.Second)
	n.kubelet = startDaemon(t, filepath.Join(n.dir, "logs"), "kubelet", n.kubeletCmd[0], n.kubeletCmd[1:]...)
}

// importImage imports an OCI archive into containerd's k8s.io namespace,
// where kubelet finds it (pods use imagePullPolicy Never or IfNotPresent).
func (n *k8sNode) importImage(t *testing.T, archive string) {
	t.Helper()
	_, err := os.Stat(archive)
	require.NoError(t, err, "the image archive (run `make image`)")
	out, err := exec.Command(n.ctd.version.ctr, "--address", n.ctd.sock, "-n", "k8s.io", "images", "import",
		"--snapshotter", "overlayfs", archive).CombinedOutput()
	require.NoError(t, err, "importing %s: %s", archive, out)
}

// netnsDir is where the runtime mounts the pods' netns: containerd's
// (netns_mounts_under_state_dir), or where CRI-O's pinns pins them.
func (n *k8sNode) netnsDir() string {
	if n.crio != nil {
		return n.crio.netnsDir()
	}
	return filepath.Join(n.ctd.dir, "state", "io.containerd.grpc.v1.cri", "netns")
}

// shareNetnsDir makes the netns dir a shared mount (shareDir).
func (n *k8sNode) shareNetnsDir(t *testing.T) {
	t.Helper()
	shareDir(t, n.netnsDir())
}

// podLogs is the tail of every container log of the pods of namespace ns
// (kubelet's server listens on 127.0.0.1 only: kubectl logs cannot reach
// them).
func (n *k8sNode) podLogs(ns string) string {
	logs, _ := filepath.Glob(filepath.Join(n.dir, "podlogs", ns+"_*", "*", "*.log"))
	var b strings.Builder
	for _, l := range logs {
		raw, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		const max = 3000
		if len(raw) > max {
			raw = raw[len(raw)-max:]
		}
		fmt.Fprintf(&b, "%s (tail):\n%s\n", l, raw)
	}
	return b.String()
}

// removeDir unmounts everything under the node's dir (kubelet's root dir
// is bind-mounted onto itself, and the libcni cache into cni-state) and
// removes it, but only once nothing is mounted there any more: the host's
// libcni cache must never be removed through its bind mount.
func (n *k8sNode) removeDir(t *testing.T) {
	unmountUnder(t, n.dir)
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Errorf("teardown: reading mountinfo: %v", err)
		return
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], n.dir+"/") {
			t.Errorf("teardown: %s is still mounted; %s is left in place", f[4], n.dir)
			return
		}
	}
	if err := os.RemoveAll(n.dir); err != nil {
		t.Errorf("teardown: removing %s: %v", n.dir, err)
	}
}

// killPods kills, by PID, every process in the node's cgroupRoot (every
// container of every pod), as a reboot would, and waits until none is left.
func (n *k8sNode) killPods(t *testing.T) {
	t.Helper()
	root := filepath.Join("/sys/fs/cgroup/pids", n.cgroupRoot)
	waitFor(t, "every process of the node's pods is gone", 30*time.Second, 100*time.Millisecond, func() error {
		var pids []string
		err := filepath.WalkDir(root, func(path string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || e.Name() != "cgroup.procs" {
				return err
			}
			raw, err := os.ReadFile(path)
			pids = append(pids, strings.Fields(string(raw))...)
			return err
		})
		if err != nil {
			return err
		}
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if len(pids) > 0 {
			return fmt.Errorf("%d processes left", len(pids))
		}
		return nil
	})
}

// wipeContainerd kills every container of the node's pods, stops
// containerd by PID and kills its shims, unmounts and deletes containerd's
// root and state, as if the runtime had lost everything, then starts it
// again with the same config and imports the images again.
func (n *k8sNode) wipeContainerd(t *testing.T, images ...string) {
	t.Helper()
	n.loseContainerd(t, "root", "state")
	for _, img := range append([]string{filepath.Join(n.ctd.dir, "pause.tar")}, images...) {
		n.importImage(t, img)
	}
}

// loseContainerd kills every container of the node's pods, stops
// containerd by PID and kills its shims, unmounts and deletes the subdirs
// of containerd's dir named (root, state), and starts it again with the
// same config.
func (n *k8sNode) loseContainerd(t *testing.T, subdirs ...string) {
	t.Helper()
	d := n.ctd
	n.killPods(t)
	n.stopContainerd()
	d.killShims()
	for _, sub := range subdirs {
		dir := filepath.Join(d.dir, sub)
		unmountUnder(t, dir)
		require.NoError(t, os.RemoveAll(dir))
	}
	n.startContainerd(t)
	n.shareNetnsDir(t)
}

// stopContainerd stops containerd by PID: SIGTERM, SIGKILL after 20 s. Its
// shims, and the containers they run, go on.
func (n *k8sNode) stopContainerd() {
	d := n.ctd
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(20 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
}

// containerdRunning tells whether containerd's process has not exited.
func (n *k8sNode) containerdRunning() bool {
	select {
	case <-n.ctd.exited:
		return false
	default:
		return true
	}
}

// startContainerd starts containerd again, same binary, flags and env, and
// waits until its CRI API answers.
func (n *k8sNode) startContainerd(t *testing.T) {
	t.Helper()
	d := n.ctd
	logf, err := os.OpenFile(d.logPath, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	defer func() { _ = logf.Close() }()
	env := d.cmd.Env
	d.cmd = exec.Command(d.cmd.Path, d.cmd.Args[1:]...)
	d.cmd.Stdout, d.cmd.Stderr, d.cmd.Env = logf, logf, env
	d.exited = make(chan struct{})
	require.NoError(t, d.cmd.Start())
	cmd, exited := d.cmd, d.exited
	go func() { _ = cmd.Wait(); close(exited) }()
	d.waitReady()
}
