package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
)

// calicoName is the file Calico's install-cni writes (CNI_CONF_NAME).
const calicoName = "10-calico.conflist"

// requireCalico fails unless the Calico-shaped primary's binaries are in
// the test's CNI dir: calicostub (built by TestMain), ptp and bandwidth
// (scripts/install-demo-deps.sh).
func requireCalico(t *testing.T) {
	t.Helper()
	for _, p := range []string{"calicostub", "ptp", "bandwidth"} {
		_, err := os.Stat(filepath.Join(cniPath, p))
		require.NoError(t, err, "%s missing from the test's CNI dir (run `make plugins`, which builds ptp and bandwidth)", p)
	}
}

// calicoNode is a node on containerd 2.4 whose primary is Calico's
// conflist, [calico, bandwidth, portmap] at cniVersion 0.3.1, with
// calicostub installed as calico; record is the stub's record file.
type calicoNode struct {
	*agentNode
	record string
}

func newCalicoNode(t *testing.T) *calicoNode {
	t.Helper()
	requireCalico(t)
	v := containerd24()
	n := newAgentNode(t, &v)
	for name, src := range map[string]string{"calico": "calicostub", "ptp": "ptp", "bandwidth": "bandwidth"} {
		require.NoError(t, os.Symlink(filepath.Join(cniPath, src), filepath.Join(n.binDir, name)))
	}
	return &calicoNode{agentNode: n, record: filepath.Join(t.TempDir(), "calico-record")}
}

// conflist is install-cni's default conflist with generation gen (and an
// MTU that changes with it, as CNI_MTU would), calico's IPAM host-local on
// the world's subnet.
func (c *calicoNode) conflist(gen int) string {
	return fmt.Sprintf(`{
  "name": %q,
  "cniVersion": "0.3.1",
  "plugins": [
    {
      "type": "calico",
      "log_level": "info",
      "datastore_type": "kubernetes",
      "nodename": "catena-it",
      "mtu": %d,
      "generation": %d,
      "recordFile": %q,
      "ipam": {"type": "host-local", "subnet": %q, "dataDir": %q},
      "policy": {"type": "k8s"},
      "kubernetes": {"kubeconfig": "/etc/cni/net.d/calico-kubeconfig"}
    },
    {"type": "bandwidth", "capabilities": {"bandwidth": true}},
    {"type": "portmap", "snat": true, "capabilities": {"portMappings": true}}
  ]
}`, c.net, 1500-gen, gen, c.record, c.w.subnet, c.w.ipamDir)
}

// writeCalico writes the conflist of generation gen as install-cni does:
// ioutil.WriteFile, in place (truncate, then write), mode 0644. split
// writes it in two halves with pause between them, a harsher writer.
func (c *calicoNode) writeCalico(gen int, split bool, pause func()) {
	c.t.Helper()
	data := []byte(c.conflist(gen))
	path := filepath.Join(c.confDir, calicoName)
	if !split {
		require.NoError(c.t, os.WriteFile(path, data, 0o644))
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	require.NoError(c.t, err)
	_, err = f.Write(data[:len(data)/2])
	require.NoError(c.t, err)
	pause()
	_, err = f.Write(data[len(data)/2:])
	require.NoError(c.t, err)
	require.NoError(c.t, f.Close())
}

// runPod runs a sandbox named name through the CRI, and kills its pause
// process at cleanup if the test ended before removing it.
func (n *agentNode) runPod(name string) (string, error) {
	n.t.Helper()
	id, err := n.d.runPod(n.d.podConfig(name, 0))
	if err == nil {
		pid := n.d.sandboxPID(id)
		n.t.Cleanup(func() { killPause(pid) })
	}
	return id, err
}

// stubEntry is a line of calicostub's record file.
type stubEntry struct {
	Cmd         string `json:"cmd"`
	ContainerID string `json:"containerID"`
	Generation  int    `json:"generation"`
}

// entries reads the stub's record file.
func (c *calicoNode) entries() []stubEntry {
	c.t.Helper()
	raw, err := os.ReadFile(c.record)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(c.t, err)
	var out []stubEntry
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var e stubEntry
		require.NoError(c.t, json.Unmarshal([]byte(line), &e), "record line %q", line)
		out = append(out, e)
	}
	return out
}

// gens returns, per container, the generation its calico ADD and DEL got
// (-1: none).
func (c *calicoNode) gens() map[string][2]int {
	c.t.Helper()
	out := map[string][2]int{}
	for _, e := range c.entries() {
		g, ok := out[e.ContainerID]
		if !ok {
			g = [2]int{-1, -1}
		}
		switch e.Cmd {
		case "ADD":
			g[0] = e.Generation
		case "DEL":
			g[1] = e.Generation
		}
		out[e.ContainerID] = g
	}
	return out
}

// addGen is the generation of id's calico ADD.
func (c *calicoNode) addGen(id string) int {
	c.t.Helper()
	g, ok := c.gens()[id]
	require.True(c.t, ok, "no calico ADD recorded for %s", id)
	return g[0]
}

// generatedGen is the generation the generated conflist wraps, or -1 if
// it is missing or not a catena conflist.
func generatedGen(raw []byte) int {
	if _, err := libcni.ConfListFromBytes(raw); err != nil {
		return -1
	}
	var conf struct {
		Plugins []struct {
			Type      string `json:"type"`
			Delegates []struct {
				Type       string `json:"type"`
				Generation int    `json:"generation"`
			} `json:"delegates"`
		} `json:"plugins"`
	}
	if json.Unmarshal(raw, &conf) != nil || len(conf.Plugins) != 1 || conf.Plugins[0].Type != "catena" ||
		len(conf.Plugins[0].Delegates) != 3 || conf.Plugins[0].Delegates[0].Type != "calico" {
		return -1
	}
	return conf.Plugins[0].Delegates[0].Generation
}

// hostVethsOn counts host links holding an IPv4 address in subnet: ptp
// gives each sandbox's host-side veth the gateway's address.
func hostVethsOn(t *testing.T, subnet string) int {
	t.Helper()
	_, ipnet, err := net.ParseCIDR(subnet)
	require.NoError(t, err)
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	require.NoError(t, err)
	n := 0
	for _, a := range addrs {
		if ipnet.Contains(a.IP) {
			n++
		}
	}
	return n
}
