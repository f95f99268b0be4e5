package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	gocni "github.com/containerd/go-cni"
	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goCNI sets up containerd's go-cni exactly as the CRI plugin does (loopback
// plus the first conflist of conf_dir, as eth0), with list as that conflist.
// Cleanup removes libcni's cached results of the world's containers.
func (w *world) goCNI(list *libcni.NetworkConfigList) gocni.CNI {
	w.t.Helper()
	confDir := w.t.TempDir()
	writeAtomic(w.t, filepath.Join(confDir, "10-catena-it.conflist"), list.Bytes)
	c, err := gocni.New(gocni.WithMinNetworkCount(2), gocni.WithPluginConfDir(confDir),
		gocni.WithPluginDir([]string{cniPath}), gocni.WithInterfacePrefix("eth"))
	require.NoError(w.t, err)
	require.NoError(w.t, c.Load(gocni.WithLoNetwork, gocni.WithDefaultConf))
	w.t.Cleanup(func() {
		m, _ := filepath.Glob(filepath.Join(libcniResults, "*-"+w.id+"-*"))
		for _, p := range m {
			_ = os.Remove(p)
		}
	})
	return c
}

// TestGoCNISetupCheckRemove: go-cni, set up like the CRI, runs Catena
// [bridge + host-local, portmap]: Setup gives eth0 the IP host-local handed
// out and the port mapping's DNAT rules; Check and Status pass; Remove
// leaves nothing, and a second Remove with no netns (as the CRI's Remove
// sends) succeeds.
func TestGoCNISetupCheckRemove(t *testing.T) {
	w := newWorld(t)
	net := "gocni-" + w.id
	c := w.goCNI(w.catenaList(net, "1.1.0", w.bridgeDelegate(), portmapDelegate))
	id := w.id + "-gocni"
	port := gocni.WithCapabilityPortMap([]gocni.PortMapping{{HostPort: hostPort(), ContainerPort: 80, Protocol: "tcp"}})

	res, err := c.Setup(bg, id, w.netns, port)
	require.NoError(t, err)
	eth0 := res.Interfaces["eth0"]
	require.NotNil(t, eth0, "go-cni names the default network's interface eth0: %+v", res.Interfaces)
	require.Len(t, eth0.IPConfigs, 1)
	ip := eth0.IPConfigs[0].IP.String()
	assert.Equal(t, []string{ip}, w.ipamFiles(net))
	require.Len(t, w.sandboxAddrs("eth0"), 1)
	assert.Contains(t, w.sandboxAddrs("eth0")[0], ip+"/")
	assert.Len(t, w.hostVeths(), 1)
	assert.Positive(t, iptablesMentions(t, id))
	require.Len(t, w.records(net), 1)
	assert.Len(t, libcniEntries(t, id), 2, "libcni cached loopback's and Catena's results")

	// The CRI's own go-cni cannot CHECK: its loopback network is pinned at
	// 0.3.1, which has no CHECK, and Check stops there. (The CRI plugin
	// never calls Check.) The same conf_dir loaded without loopback checks
	// Catena's network alone.
	require.ErrorContains(t, c.Check(bg, id, w.netns, port), `configuration version "0.3.1" does not support the CHECK command`)
	checker, err := gocni.New(gocni.WithPluginConfDir(c.GetConfig().PluginConfDir), gocni.WithPluginDir([]string{cniPath}), gocni.WithInterfacePrefix("eth"))
	require.NoError(t, err)
	require.NoError(t, checker.Load(gocni.WithDefaultConf))
	require.NoError(t, checker.Check(bg, id, w.netns, port))
	require.NoError(t, c.Status(), "go-cni's Status runs STATUS through Catena")

	// CHECK really reaches the delegates: without its address, bridge's
	// CHECK fails, through Catena, naming it
	run(t, "ip", "-n", filepath.Base(w.netns), "addr", "flush", "dev", "eth0")
	require.ErrorContains(t, checker.Check(bg, id, w.netns, port), "delegate 0 (bridge) CHECK failed")

	require.NoError(t, c.Remove(bg, id, w.netns, port))
	assert.Empty(t, w.ipamFiles(net))
	assert.Empty(t, w.sandboxAddrs("eth0"))
	assert.Empty(t, w.hostVeths())
	assert.Zero(t, iptablesMentions(t, id))
	assert.Empty(t, w.records(net))
	assert.Empty(t, libcniEntries(t, id))

	require.NoError(t, c.Remove(bg, id, "", port), "a second Remove, without netns")
}

// TestGoCNILeakCatenaVersusPlainConflist: go-cni as the CRI uses it, with
// the second plugin failing ADD and DEL. Like a runtime, each attempt is a
// fresh sandbox that is Setup, then Removed after the failure. Catena: no
// Remove fails and no IP leaks; plain conflist: every Remove fails and every
// attempt leaks an IP.
func TestGoCNILeakCatenaVersusPlainConflist(t *testing.T) {
	const attempts = 10
	w := newWorld(t)
	bad := failer(`"failAdd":true,"failDel":true`)
	cases := []struct {
		name        string
		list        func(net string) *libcni.NetworkConfigList
		wantLeaked  int
		wantRemoveF int
	}{
		{"catena", func(net string) *libcni.NetworkConfigList {
			return w.catenaList(net, "1.1.0", w.bridgeDelegate(), bad)
		}, 0, 0},
		{"plain conflist", func(net string) *libcni.NetworkConfigList {
			return w.plainList(net, "1.1.0", w.bridgeDelegate(), bad)
		}, attempts, attempts},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			net := fmt.Sprintf("gocnileak%d-%s", i, w.id)
			c := w.goCNI(tc.list(net))
			setupFailures, removeFailures := 0, 0
			for a := 0; a < attempts; a++ {
				id := fmt.Sprintf("%s-leak%d-%d", w.id, i, a)
				netns := w.addNetns(id)
				if _, err := c.Setup(bg, id, netns); err != nil {
					setupFailures++
				}
				if err := c.Remove(bg, id, netns); err != nil {
					removeFailures++
				}
			}
			leaked := len(w.ipamFiles(net))
			t.Logf("go-cni, %s: %d attempts, %d Setup failures, %d Remove failures, %d IPs leaked",
				tc.name, attempts, setupFailures, removeFailures, leaked)
			assert.Equal(t, attempts, setupFailures)
			assert.Equal(t, tc.wantRemoveF, removeFailures)
			assert.Equal(t, tc.wantLeaked, leaked)
			assert.Empty(t, w.records(net))
		})
	}
}
