package integration

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// flannelNode is flannel's CNI plugin on one node as flanneld leaves it: the
// subnet.env flanneld would write (the harness writes it: no flanneld runs
// on one node), flannel's own cache dir (its dataDir, one file per
// container whose ADD got that far, read back at DEL), and its delegate,
// bridge + host-local, on a world's bridge, subnet and host-local dir.
type flannelNode struct {
	t          *testing.T
	net        string
	bridge     string
	subnet     *net.IPNet // FLANNEL_SUBNET: the node's, host-local's range
	ipamDir    string     // host-local's dataDir
	subnetFile string
	dataDir    string
}

// flannelPortmap is portmap as kube-flannel's conflist has it.
const flannelPortmap = `{"type":"portmap","capabilities":{"portMappings":true}}`

// requireFlannel fails unless flannel's plugin is in the test's CNI dir.
func requireFlannel(t *testing.T) {
	t.Helper()
	_, err := os.Stat(filepath.Join(cniPath, "flannel"))
	require.NoError(t, err, "flannel's CNI plugin missing (run `make plugins`, which runs scripts/install-flannel.sh)")
}

// newFlannelNode is flannel on w's bridge and subnet, network name, with
// host-local's data in ipamDir, flannel's cache in dataDir and subnet.env
// at subnetFile, which it writes.
func newFlannelNode(t *testing.T, w *world, name, ipamDir, dataDir, subnetFile string) *flannelNode {
	t.Helper()
	requireFlannel(t)
	_, subnet, err := net.ParseCIDR(w.subnet)
	require.NoError(t, err)
	f := &flannelNode{t: t, net: name, bridge: w.bridge, subnet: subnet, ipamDir: ipamDir,
		subnetFile: subnetFile, dataDir: dataDir}
	f.writeSubnetEnv(f.subnetEnv())
	return f
}

// subnetEnv is what flanneld writes: the cluster network (the /16 holding
// the node's /24), the node's subnet by its gateway address, vxlan's MTU,
// and masquerading done by flanneld (so bridge does none: kube-flannel's
// default).
func (f *flannelNode) subnetEnv() string {
	ip := f.subnet.IP.To4()
	return fmt.Sprintf("FLANNEL_NETWORK=%d.%d.0.0/16\nFLANNEL_SUBNET=%d.%d.%d.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n",
		ip[0], ip[1], ip[0], ip[1], ip[2])
}

// writeSubnetEnv (re)writes subnet.env atomically, as flanneld does.
func (f *flannelNode) writeSubnetEnv(content string) {
	f.t.Helper()
	require.NoError(f.t, os.MkdirAll(filepath.Dir(f.subnetFile), 0o755))
	writeAtomic(f.t, f.subnetFile, []byte(content))
}

// plugin is flannel's entry of kube-flannel's conflist (its delegate keys
// hairpinMode and isDefaultGateway), with this node's subnet.env, cache
// dir, bridge and host-local dir.
func (f *flannelNode) plugin() string {
	return fmt.Sprintf(`{"type":"flannel","subnetFile":%q,"dataDir":%q,`+
		`"delegate":{"bridge":%q,"hairpinMode":true,"isDefaultGateway":true},"ipam":{"type":"host-local","dataDir":%q}}`,
		f.subnetFile, f.dataDir, f.bridge, f.ipamDir)
}

// conflist is kube-flannel's conflist, cniVersion 0.3.1: [flannel, extra...,
// portmap].
func (f *flannelNode) conflist(extra ...string) string {
	plugins := append(append([]string{f.plugin()}, extra...), flannelPortmap)
	return fmt.Sprintf(`{"cniVersion":"0.3.1","name":%q,"plugins":[%s]}`, f.net, strings.Join(plugins, ","))
}

// flannelIn is flannel on w as a test's: its files under a temp dir.
func flannelIn(t *testing.T, w *world, name string) *flannelNode {
	t.Helper()
	dir := t.TempDir()
	return newFlannelNode(t, w, name, w.ipamDir, filepath.Join(dir, "flannel"), filepath.Join(dir, "run-flannel", "subnet.env"))
}

// on is f for test t: its checks fail t (a subtest's, not the one that
// made f).
func (f *flannelNode) on(t *testing.T) *flannelNode {
	c := *f
	c.t = t
	return &c
}

// cacheFiles lists flannel's own cache dir: the container IDs whose
// rendered delegate config flannel keeps for their DEL.
func (f *flannelNode) cacheFiles() []string {
	f.t.Helper()
	return dirEntries(f.t, f.dataDir)
}

// ips lists host-local's allocations on flannel's network.
func (f *flannelNode) ips() []string {
	f.t.Helper()
	entries := dirEntries(f.t, filepath.Join(f.ipamDir, f.net))
	var ips []string
	for _, e := range entries {
		if e != "lock" && !strings.HasPrefix(e, "last_reserved_ip") {
			ips = append(ips, e)
		}
	}
	return ips
}

// ipHolders are the container IDs host-local's allocations name (each IP
// file holds its container's ID).
func (f *flannelNode) ipHolders() []string {
	f.t.Helper()
	var ids []string
	for _, ip := range f.ips() {
		raw, err := os.ReadFile(filepath.Join(f.ipamDir, f.net, ip))
		require.NoError(f.t, err)
		id, _, _ := strings.Cut(strings.TrimSpace(string(raw)), "\n")
		ids = append(ids, strings.TrimSpace(id))
	}
	return ids
}

// held is what the node holds of flannel's network, for messages and
// summaries.
type flannelHeld struct {
	IPs, Veths, Files, Records int
}

func (h flannelHeld) String() string {
	return fmt.Sprintf("%d IPs, %d veths, %d files in flannel's cache dir, %d records", h.IPs, h.Veths, h.Files, h.Records)
}

// held counts IPs, veths on the bridge, flannel's cache files and Catena's
// records (in cacheDir) of the network.
func (f *flannelNode) held(cacheDir string) flannelHeld {
	f.t.Helper()
	recs, err := filepath.Glob(filepath.Join(cacheDir, "records", f.net, "*.json"))
	require.NoError(f.t, err)
	return flannelHeld{IPs: len(f.ips()), Veths: len(bridgePorts(f.t, f.bridge)), Files: len(f.cacheFiles()), Records: len(recs)}
}

// heldSettled is held once it equals want, or after within: a veth whose
// netns the runtime removed goes away only when the kernel's asynchronous
// netns cleanup runs, which can lag RunPodSandbox's return under load (a CI
// run counted the last attempt's veth of the plain conflist). IPs, files and
// records do not change by themselves; a count that is still wrong after
// within is returned as it is, for the caller's assertion.
func (f *flannelNode) heldSettled(cacheDir string, want flannelHeld, within time.Duration) flannelHeld {
	f.t.Helper()
	deadline := time.Now().Add(within)
	for {
		h := f.held(cacheDir)
		if h == want || time.Now().After(deadline) {
			return h
		}
		time.Sleep(50 * time.Millisecond)
	}
}
