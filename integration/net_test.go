package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

var seq atomic.Int32

// world is one test's private slice of the host: a netns, a bridge name, a
// subnet, a host-local data dir, a Catena cache dir and a libcni cache dir.
type world struct {
	t        *testing.T
	id       string // unique per test: netns, bridge and container IDs derive from it
	netns    string // path
	bridge   string
	subnet   string
	ipamDir  string
	cacheDir string
	cni      *libcni.CNIConfig
}

// worldSubnet is the n-th world's /24 in a test process: 10.<150 + pid%50,
// plus one for each 256 worlds>.<n%256>.0/24. The integration tests make
// more than 255 worlds (a fresh-clone run reached 10.160.260.0/24, which
// bridge refused).
func worldSubnet(pid, n int) string {
	return fmt.Sprintf("10.%d.%d.0/24", 150+pid%50+n/256, n%256)
}

func newWorld(t *testing.T) *world {
	t.Helper()
	requireRoot(t)
	n := seq.Add(1)
	id := fmt.Sprintf("cit%d-%d", os.Getpid()%100000, n)
	w := &world{
		t:      t,
		id:     id,
		bridge: fmt.Sprintf("cbr%d%d", os.Getpid()%10000, n),
		subnet: worldSubnet(os.Getpid(), int(n)),
	}
	tmp := t.TempDir()
	w.ipamDir = filepath.Join(tmp, "ipam")
	w.cacheDir = filepath.Join(tmp, "catena")
	// Last of the world's cleanups, before tmp is removed: a retrier that
	// a failed DEL started (also one of the cleanups' DELs) is not left
	// behind, writing to the cache dir.
	t.Cleanup(func() { reapRetriers(t, w.cacheDir, retrierGrace) })
	w.cni = libcni.NewCNIConfigWithCacheDir([]string{cniPath}, filepath.Join(tmp, "libcni"), nil)

	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", w.bridge).Run() })
	w.netns = w.addNetns(id)
	return w
}

// addNetns creates a named netns, deleted at cleanup, and returns its path.
func (w *world) addNetns(name string) string {
	w.t.Helper()
	run(w.t, "ip", "netns", "add", name)
	w.t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	return "/var/run/netns/" + name
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	require.NoError(t, err, "%s %v: %s", name, args, out)
	return string(out)
}

// bridgeDelegate is bridge + host-local on the world's bridge and subnet.
func (w *world) bridgeDelegate() string {
	return fmt.Sprintf(`{"type":"bridge","bridge":%q,"isGateway":true,"ipMasq":false,
	  "ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":%q}]]}}`, w.bridge, w.ipamDir, w.subnet)
}

// catenaList wraps delegates in one catena entry of a conflist.
func (w *world) catenaList(name, version string, delegates ...string) *libcni.NetworkConfigList {
	w.t.Helper()
	conf := fmt.Sprintf(`{"cniVersion":%q,"name":%q,"plugins":[{"type":"catena","cacheDir":%q,
	  "delegateTimeout":"20s","lockTimeout":"10s","capabilities":{"portMappings":true},
	  "delegates":[%s]}]}`, version, name, w.cacheDir, strings.Join(delegates, ","))
	list, err := libcni.ConfListFromBytes([]byte(conf))
	require.NoError(w.t, err)
	return list
}

// plainList is the same delegates as a plain conflist run by libcni.
func (w *world) plainList(name, version string, delegates ...string) *libcni.NetworkConfigList {
	w.t.Helper()
	conf := fmt.Sprintf(`{"cniVersion":%q,"name":%q,"plugins":[%s]}`, version, name, strings.Join(delegates, ","))
	list, err := libcni.ConfListFromBytes([]byte(conf))
	require.NoError(w.t, err)
	return list
}

func (w *world) rt(container string, capArgs map[string]any) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: container, NetNS: w.netns, IfName: "eth0", CapabilityArgs: capArgs}
}

// ipamFiles lists host-local's allocations for a network (IP files only).
func (w *world) ipamFiles(network string) []string {
	w.t.Helper()
	entries, err := os.ReadDir(filepath.Join(w.ipamDir, network))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(w.t, err)
	var ips []string
	for _, e := range entries {
		if e.Name() != "lock" && !strings.HasPrefix(e.Name(), "last_reserved_ip") {
			ips = append(ips, e.Name())
		}
	}
	return ips
}

// records lists Catena's record files for a network.
func (w *world) records(network string) []string {
	w.t.Helper()
	m, err := filepath.Glob(filepath.Join(w.cacheDir, "records", network, "*.json"))
	require.NoError(w.t, err)
	return m
}

// hostVeths lists the host-side interfaces enslaved to the world's bridge.
func (w *world) hostVeths() []string {
	w.t.Helper()
	br, err := netlink.LinkByName(w.bridge)
	if err != nil {
		return nil // no bridge, no veth on it
	}
	links, err := netlink.LinkList()
	require.NoError(w.t, err)
	var out []string
	for _, l := range links {
		if l.Attrs().MasterIndex == br.Attrs().Index {
			out = append(out, l.Attrs().Name)
		}
	}
	return out
}

// sandboxAddrs lists the IPv4 addresses of ifname inside the netns.
func (w *world) sandboxAddrs(ifname string) []string {
	w.t.Helper()
	return w.sandboxAddrsOf(w.netns, ifname)
}

// sandboxAddrsOf lists the IPv4 addresses of ifname inside the netns at path.
func (w *world) sandboxAddrsOf(path, ifname string) []string {
	w.t.Helper()
	nl := w.netlinkAt(path)
	link, err := nl.LinkByName(ifname)
	if err != nil {
		return nil
	}
	addrs, err := nl.AddrList(link, netlink.FAMILY_V4)
	require.NoError(w.t, err)
	var out []string
	for _, a := range addrs {
		out = append(out, a.IPNet.String())
	}
	return out
}

// netlinkAt is a netlink handle in the netns at path, closed at cleanup.
func (w *world) netlinkAt(path string) *netlink.Handle {
	w.t.Helper()
	h, err := netns.GetFromPath(path)
	require.NoError(w.t, err)
	defer func() { _ = h.Close() }()
	nl, err := netlink.NewHandleAt(h)
	require.NoError(w.t, err)
	w.t.Cleanup(nl.Close)
	return nl
}

// iptablesMentions counts iptables rules (all tables) naming the container.
func iptablesMentions(t *testing.T, container string) int {
	t.Helper()
	out := run(t, "iptables-save")
	return strings.Count(out, container)
}

// readRecord decodes a record file as catena's store does (the newest
// journal entry that verifies) and returns it as a generic map.
func readRecord(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	// The entries end at the zeros that preallocate the file, which must
	// run to its end (cache/recordfile_slot.go).
	if end := bytes.IndexByte(raw, 0); end >= 0 {
		require.Empty(t, bytes.Trim(raw[end:], "\x00"), "non-zero bytes after the padding of %s", path)
		raw = raw[:end]
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	require.NotEmpty(t, lines)
	// Replay the journal: a snapshot's "record" stands alone; a delta's
	// top-level fields replace the record's and its non-null steps the
	// record's steps (cache/delta.go).
	var rec map[string]any
	for i, line := range lines {
		var env struct {
			Schema int            `json:"schema"`
			Record map[string]any `json:"record"`
			Delta  map[string]any `json:"delta"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &env), "line %d of %s", i+1, path)
		if env.Schema == 1 {
			rec = env.Record
			continue
		}
		require.Equal(t, 2, env.Schema, "line %d of %s", i+1, path)
		require.NotNil(t, rec, "a delta with no snapshot before it in %s", path)
		steps, _ := env.Delta["steps"].([]any)
		prev, _ := rec["steps"].([]any)
		require.Len(t, steps, len(prev), "line %d of %s", i+1, path)
		for j, st := range steps {
			if st == nil {
				steps[j] = prev[j]
			}
		}
		rec = env.Delta
	}
	return rec
}

var bg = context.Background()

func TestWorldSubnetIsValid(t *testing.T) {
	for _, tc := range []struct {
		pid, n int
		want   string
	}{
		{100, 1, "10.150.1.0/24"},
		{149, 255, "10.199.255.0/24"},
		{149, 256, "10.200.0.0/24"},
		{100, 600, "10.152.88.0/24"},
	} {
		got := worldSubnet(tc.pid, tc.n)
		assert.Equal(t, tc.want, got)
		_, _, err := net.ParseCIDR(got)
		assert.NoError(t, err)
	}
}
