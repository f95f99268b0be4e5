package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// k8sCluster is a single-node Kubernetes cluster on this host: the control
// plane on 127.0.0.1 and one node, everything under one private dir.
type k8sCluster struct {
	*controlPlane
	node *k8sNode
	home string // kubectl's HOME (its cache)
}

// k8sTimings are the bring-up's figures, from the start.
type k8sTimings struct {
	apiReady, nodeReady, serviceAccount time.Duration
}

// startK8sCluster brings the cluster up and waits until the node is Ready
// and the default ServiceAccount exists; the node runs the primary
// [bridge + host-local, portmap, tuning], with Catena's image imported;
// containerd's and kubelet's metrics are served on 127.0.0.1.
//
// Teardown, in the reverse order of the cleanups registered here: delete
// the workloads (kubelet tears their pods down), stop kubelet, the
// scheduler, the controller-manager, containerd (removing any sandbox
// left, killing its shims), etcd, and the API server last; unmount and
// remove the private dir; then restore the host and check it.
func startK8sCluster(t *testing.T) (*k8sCluster, k8sTimings) {
	t.Helper()
	requireRoot(t)
	start := time.Now()
	var tm k8sTimings
	w, fw := newWorld(t), newWorld(t)
	dir, err := os.MkdirTemp("", "k8s")
	require.NoError(t, err)
	n := &k8sNode{name: "catena-" + w.id, dir: dir, cgroupRoot: "catena-" + w.id, w: w, net: "k8s-" + w.id, fw: fw}
	guard := guardHost(t, n.cgroupRoot, n.net, flannelNetName(w.id))
	t.Cleanup(func() { n.removeDir(t) })

	cp := startStore(t, dir, n.name)
	tm.apiReady = time.Since(start)
	c := &k8sCluster{controlPlane: cp, node: n, home: filepath.Join(dir, "home")}
	require.NoError(t, os.MkdirAll(c.home, 0o700))

	n.makeCNIDirs(t)
	ctd := containerd24()
	ctd.metrics = "127.0.0.1:" + strconv.Itoa(freePort(t))
	n.ctd = startContainerdWithBin(t, ctd, n.cniBin, "")
	n.shareNetnsDir(t)
	// the runtime's socket by its usual name, for the agent's default
	require.NoError(t, os.Symlink(filepath.Base(n.ctd.sock), filepath.Join(n.ctd.dir, "containerd.sock")))
	n.writePrimary(t, n.primary())
	c.waitNetwork(t, "bridge")
	n.importImage(t, catenaImageArchive(t))

	cp.startControllers(t)
	guard.makeCgroupRoot()
	n.pki, n.kubeletPort = cp.pki, freePort(t)
	n.startKubelet(t, cp.bins, cp.kubeconfigs["kubelet"])
	t.Cleanup(func() { n.kubelet.stop(30 * time.Second) })
	t.Cleanup(func() { c.deleteWorkloads(t) })

	waitFor(t, "node "+n.name+" is Ready", 2*time.Minute, 250*time.Millisecond, func() error {
		return c.nodeReady(t)
	}, cp.apiserver, n.kubelet)
	tm.nodeReady = time.Since(start)
	waitFor(t, "the default ServiceAccount exists", 2*time.Minute, 250*time.Millisecond, func() error {
		_, err := c.kubectlErr(nil, "get", "serviceaccount", "default", "-n", "default", "-o", "name")
		return err
	}, cp.apiserver, cp.cm)
	tm.serviceAccount = time.Since(start)
	return c, tm
}

// catenaImageArchive is the image `make image` built, bin/catena-image.tar.
func catenaImageArchive(t *testing.T) string {
	t.Helper()
	path := filepath.Join(binDirOf(t), "catena-image.tar")
	_, err := os.Stat(path)
	require.NoError(t, err, "%s missing (run `make image`)", path)
	return path
}

// waitNetwork waits until containerd has loaded the node's network with a
// plugin of type typ in it (the primary's, or the one generated from it).
func (c *k8sCluster) waitNetwork(t *testing.T, typ string) {
	t.Helper()
	c.node.waitNetwork(t, typ)
}

// waitNetworkWithout waits until the loaded network has no plugin of type
// typ.
func (c *k8sCluster) waitNetworkWithout(t *testing.T, typ string) {
	t.Helper()
	c.node.waitNetworkWithout(t, typ)
}

// waitNetworkOf waits until containerd has loaded network net, with a
// plugin of type typ in it or not (want).
func (c *k8sCluster) waitNetworkOf(t *testing.T, net, typ string, want bool) {
	t.Helper()
	c.node.waitNetworkOf(t, net, typ, want)
}

// waitNetwork waits until the node's runtime has loaded its network with a
// plugin of type typ in it (the primary's, or the one generated from it).
func (n *k8sNode) waitNetwork(t *testing.T, typ string) {
	t.Helper()
	n.waitNetworkOf(t, n.net, typ, true)
}

// waitNetworkWithout waits until the node's runtime has loaded its network
// with no plugin of type typ in it.
func (n *k8sNode) waitNetworkWithout(t *testing.T, typ string) {
	t.Helper()
	n.waitNetworkOf(t, n.net, typ, false)
}

// waitNetworkOf waits until the node's runtime has loaded network net,
// with a plugin of type typ in it or not (want).
func (n *k8sNode) waitNetworkOf(t *testing.T, net, typ string, want bool) {
	t.Helper()
	if n.crio != nil {
		n.crio.waitNetworkLoaded(t, net, typ, want)
		return
	}
	n.ctd.eventually(fmt.Sprintf("the CRI plugin loads network %s, %s in it: %t", net, typ, want), func() error {
		info := n.ctd.cniStatus()
		if !strings.Contains(info, fmt.Sprintf("%q", net)) {
			return fmt.Errorf("network %s not loaded", net)
		}
		has := strings.Contains(info, fmt.Sprintf(`\"type\":\"%s\"`, typ)) || strings.Contains(info, fmt.Sprintf(`"type":"%s"`, typ))
		if has != want {
			return fmt.Errorf("network %s loaded, %s in it: %t", net, typ, has)
		}
		return nil
	})
}

// deleteWorkloads deletes every workload and waits (bounded) until kubelet
// has torn their pods down, while kubelet still runs.
func (c *k8sCluster) deleteWorkloads(t *testing.T) {
	for _, ns := range []string{"default", "catena-system"} {
		if out, err := c.kubectlErr(nil, "delete", "deployments,daemonsets,pods", "--all", "-n", ns,
			"--wait=false", "--ignore-not-found"); err != nil {
			t.Logf("teardown: deleting workloads in %s: %v: %s", ns, err, out)
		}
	}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		out, err := c.kubectlErr(nil, "get", "pods", "-A", "-o", "name")
		if err == nil && strings.TrimSpace(out) == "" {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("teardown: pods still there after 90s; containerd's cleanup removes their sandboxes")
}
