package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/catena-cni/catena/tools/nodebench"
)

// The CRI-O node is a second node of the cluster, on the same host: a
// kubelet driving a private CRI-O (crio_harness_test.go: its config, the
// runc wrapper, copyimg, its cleanup) instead of containerd, registered
// with the cluster's API server beside the containerd node, with its own
// client certificate, cgroupRoot, bridge, subnet, network, CNI dirs and
// conf dir. The CRI-O scenarios (k8s_crio_test.go) bring it up and tear it
// down after them: workloads deleted, kubelet stopped, the Node deleted,
// CRI-O stopped and its dirs removed. Workloads and the DaemonSets are
// pinned to it by node name.

// crioNodeTimings are the CRI-O node's bring-up figures, from its start.
type crioNodeTimings struct {
	crio, ready time.Duration
}

// crioApps are the CRI-O scenarios' Deployments, deleted at teardown.
var crioApps = []string{"cweb", "cseed-plain", "cseed", densityApp}

// startCRIONode brings up the CRI-O node: its CNI dirs, CRI-O with the
// pause image and Catena's loaded into its storage (copyimg), the primary
// [bridge + host-local, portmap, tuning] in its network_dir, and kubelet;
// it waits until the node is Ready.
func (c *k8sCluster) startCRIONode(t *testing.T) (*k8sNode, crioNodeTimings) {
	t.Helper()
	start := time.Now()
	var tm crioNodeTimings
	w := newWorld(t)
	dir, err := os.MkdirTemp("", "k8scrio")
	require.NoError(t, err)
	n := &k8sNode{name: "catena-crio-" + w.id, dir: dir, cgroupRoot: "catena-crio-" + w.id, w: w, net: "crio-" + w.id}
	// the cluster's serving certificate (for 127.0.0.1) and a port of its own
	n.pki, n.kubeletPort = c.node.pki, freePort(t)
	t.Cleanup(func() { n.removeDir(t) })
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "logs"), 0o700))
	n.makeCNIDirs(t)

	ref := catenaImageRef(t)
	n.crio = startCRIOWith(t, w, "", crioSetup{dir: filepath.Join(dir, "crio"), binDirs: []string{n.cniBin}, binDirsOnly: true,
		cgroupParent: "/" + n.cgroupRoot, sharedNetns: true, images: map[string]string{ref: catenaImageArchive(t)}})
	n.writePrimary(t, n.primary())
	n.waitNetwork(t, "bridge")
	tm.crio = time.Since(start)

	// CRI-O's cleanup removes the cgroupRoot, after kubelet has stopped
	makeCgroupRoot(t, n.cgroupRoot)
	t.Cleanup(func() { c.deleteNode(t, n.name) })
	n.startKubelet(t, c.bins, c.nodeKubeconfig(t, n.name))
	t.Cleanup(func() { n.kubelet.stop(30 * time.Second) })
	t.Cleanup(func() { c.deleteCRIOWorkloads(t, n.name) })
	waitFor(t, "node "+n.name+" is Ready", 2*time.Minute, 250*time.Millisecond, func() error {
		return c.nodeReadyNamed(n.name)
	}, n.kubelet)
	tm.ready = time.Since(start)
	return n, tm
}

// catenaImageRef is the image reference `make image` built
// (bin/catena-image.ref).
func catenaImageRef(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(binDirOf(t), "catena-image.ref"))
	require.NoError(t, err, "run `make image`")
	return strings.TrimSpace(string(raw))
}

// deleteCRIOWorkloads deletes the CRI-O scenarios' Deployments and
// Catena's DaemonSets, and waits (bounded) until the node runs no pod,
// while its kubelet still runs.
func (c *k8sCluster) deleteCRIOWorkloads(t *testing.T, node string) {
	for _, d := range crioApps {
		if out, err := c.kubectlErr(nil, "delete", "deployment", d, "-n", "default", "--wait=false", "--ignore-not-found"); err != nil {
			t.Logf("teardown: deleting deployment %s: %v: %s", d, err, out)
		}
	}
	if out, err := c.kubectlErr(nil, "delete", "daemonsets", "--all", "-n", "catena-system", "--wait=false", "--ignore-not-found"); err != nil {
		t.Logf("teardown: deleting the DaemonSets: %v: %s", err, out)
	}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		out, err := c.kubectlErr(nil, "get", "pods", "-A", "--field-selector", "spec.nodeName="+node, "-o", "name")
		if err == nil && strings.TrimSpace(out) == "" {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("teardown: pods still on %s after 90s; CRI-O's cleanup removes their sandboxes", node)
}

// deleteNode deletes node from the API, once its kubelet has stopped (a
// running kubelet registers it again): the DaemonSets applied later must
// not see it.
func (c *k8sCluster) deleteNode(t *testing.T, node string) {
	if out, err := c.kubectlErr(nil, "delete", "node", node, "--ignore-not-found"); err != nil {
		t.Errorf("teardown: deleting node %s: %v: %s", node, err, out)
	}
}

// crioHostPathMap is hostPathMap on the CRI-O node: its conf dir, bin dir,
// /var/lib/cni and netns dir, CRI-O's run dir (its socket, where a node
// has /var/run/crio), and an empty dir for /run/containerd.
func (n *k8sNode) crioHostPathMap(t *testing.T) map[string]string {
	t.Helper()
	none := filepath.Join(n.dir, "no-containerd")
	require.NoError(t, os.MkdirAll(none, 0o755))
	run := filepath.Dir(n.crio.sock)
	return map[string]string{
		"/etc/cni/net.d":  n.confDir(),
		"/opt/cni/bin":    n.cniBin,
		"/var/lib/cni":    n.cniState,
		"/run/containerd": none,
		"/var/run/netns":  n.netnsDir(),
		"/var/run/crio":   run,
		"/run/crio":       run,
	}
}

// crioAgent points the agent at CRI-O's socket. deploy/catena.yaml mounts
// /var/run/crio, which crioHostPathMap maps to CRI-O's run dir, so the
// agent's --runtime-endpoint auto finds /var/run/crio/crio.sock there, as
// on a real CRI-O node. A manifest without that mount gets CRI-O's run dir
// mounted at its own path and CATENA_AGENT_RUNTIME_ENDPOINT set in the
// ConfigMap (the flag is not among the DaemonSet's args, so the variable
// applies).
func (n *k8sNode) crioAgent(t *testing.T, objs []any) {
	t.Helper()
	run := filepath.Dir(n.crio.sock)
	none := n.crioHostPathMap(t)["/run/containerd"]
	mounts := func(path string) func(corev1.Volume) bool {
		return func(v corev1.Volume) bool { return v.HostPath != nil && v.HostPath.Path == path }
	}
	for _, o := range objs {
		ds, ok := o.(*appsv1.DaemonSet)
		if !ok {
			continue
		}
		spec := &ds.Spec.Template.Spec
		if !slices.ContainsFunc(spec.Volumes, mounts(none)) || slices.ContainsFunc(spec.Volumes, mounts(run)) {
			continue
		}
		dirType := corev1.HostPathDirectory
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "crio-run",
			VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: run, Type: &dirType}}})
		for i := range spec.Containers {
			spec.Containers[i].VolumeMounts = append(spec.Containers[i].VolumeMounts, corev1.VolumeMount{Name: "crio-run", MountPath: run})
		}
		for _, o := range objs {
			if cm, ok := o.(*corev1.ConfigMap); ok && cm.Name == "catena-options" {
				cm.Data["CATENA_AGENT_RUNTIME_ENDPOINT"] = "unix://" + n.crio.sock
			}
		}
	}
}

// waitNetworkLoaded waits until CRI-O's CNI layer (ocicni, which watches
// network_dir) has loaded network net from its file as it is now, with a
// plugin of type typ in it or not (want).
func (c *crioDaemon) waitNetworkLoaded(t *testing.T, net, typ string, want bool) {
	t.Helper()
	start := time.Now()
	var err error
	for {
		if err = c.networkLoaded(net, typ, want); err == nil {
			return
		}
		select {
		case <-c.exited:
			t.Fatalf("crio exited while waiting until it loads network %s, %s in it: %t: %v\n%s", net, typ, want, err, c.logTail())
		default:
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("timed out waiting until CRI-O loads network %s, %s in it: %t: %v\n%s", net, typ, want, err, c.logTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// networkLoaded is nil once network net's file (the first in network_dir
// that names it: ocicni keeps the first) has a plugin of type typ or not
// (want), and CRI-O logged finding it since the file and the dir last
// changed.
func (c *crioDaemon) networkLoaded(net, typ string, want bool) error {
	entries, err := os.ReadDir(c.confDir)
	if err != nil {
		return err
	}
	dirInfo, err := os.Stat(c.confDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !slices.Contains([]string{".conf", ".conflist", ".json"}, filepath.Ext(e.Name())) {
			continue
		}
		path := filepath.Join(c.confDir, e.Name())
		info, err := os.Stat(path)
		if err != nil {
			continue // removed meanwhile
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var conf any
		if json.Unmarshal(raw, &conf) != nil {
			continue
		}
		if m, ok := conf.(map[string]any); !ok || m["name"] != net {
			continue
		}
		if has := slices.Contains(configTypes(conf), typ); has != want {
			return fmt.Errorf("%s: %s in it: %t", e.Name(), typ, has)
		}
		changed := info.ModTime()
		if dirInfo.ModTime().After(changed) {
			changed = dirInfo.ModTime()
		}
		if found := c.lastFound(net, path); !found.After(changed) {
			return fmt.Errorf("CRI-O last found %s at %s, before it changed at %s", path, found.Format(time.RFC3339Nano), changed.Format(time.RFC3339Nano))
		}
		return nil
	}
	return fmt.Errorf("no file in %s names network %s", c.confDir, net)
}

// lastFound is the time of CRI-O's last "Found CNI network net ... at
// path" line (zero if none).
func (c *crioDaemon) lastFound(net, path string) time.Time {
	lines := strings.Split(c.log(), "\n")
	prefix, suffix := "Found CNI network "+net+" (type=", ") at "+path
	for i := len(lines) - 1; i >= 0; i-- {
		if at, msg, ok := nodebench.ParseLogrusLine(lines[i]); ok && strings.HasPrefix(msg, prefix) && strings.HasSuffix(msg, suffix) {
			return at
		}
	}
	return time.Time{}
}

// configTypes are the values of every "type" key in a CNI config, nested
// ones included (ipam, Catena's delegates).
func configTypes(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "type" {
				out = append(out, s)
			} else {
				out = append(out, configTypes(x)...)
			}
		}
	case []any:
		for _, x := range v {
			out = append(out, configTypes(x)...)
		}
	}
	return out
}

// sandboxIDs are the IDs of sandboxes.
func sandboxIDs(sandboxes []*cri.PodSandbox) []string {
	ids := make([]string, 0, len(sandboxes))
	for _, sb := range sandboxes {
		ids = append(ids, sb.Id)
	}
	return ids
}
