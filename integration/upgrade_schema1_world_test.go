package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/catena-cni/catena/integration/schema1"
)

// A node that ran catena 1daa3b7 (integration/schema1): the fixed netns,
// bridge, subnet and paths its records cache, its records in a fresh cache
// dir, and what the delegates those records call added made real again.
type s1Node struct {
	*world
	list *libcni.NetworkConfigList // the node's conflist after the upgrade
	// newest is when the newest record was created (GC spares a record
	// younger than gcGracePeriod).
	newest time.Time
}

// oldRecord is what a record file's newest line says, read with plain
// encoding/json: the world is rebuilt from the file, not from the decoder
// under test.
type oldRecord struct {
	NetNS   string    `json:"netns"`
	Args    string    `json:"args"`
	Created time.Time `json:"created"`
	Steps   []struct {
		Type       string          `json:"type"`
		CNIVersion string          `json:"cniVersion"`
		State      string          `json:"state"`
		Config     json.RawMessage `json:"config"`
	} `json:"steps"`
}

func newS1Node(t *testing.T) *s1Node {
	t.Helper()
	requireRoot(t)
	if _, err := os.Lstat(schema1.Base); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s exists (err %v): a crashed run of this test or scripts/make-schema1-testdata.sh left it, or one is running", schema1.Base, err)
	}
	if _, err := netlink.LinkByName(schema1.Bridge); err == nil {
		t.Fatalf("bridge %s exists: another run is using the schema-1 world", schema1.Bridge)
	}
	require.NoError(t, os.Mkdir(schema1.Base, 0o700))
	t.Cleanup(func() { _ = os.RemoveAll(schema1.Base) })
	t.Cleanup(func() { reapRetriers(t, filepath.Join(schema1.Base, "cache"), retrierGrace) })
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", schema1.Bridge).Run() })
	w := &world{t: t, id: "s1", bridge: schema1.Bridge, subnet: schema1.Subnet, ipamDir: schema1.IPAMDir,
		cacheDir: filepath.Join(schema1.Base, "cache"),
		cni:      libcni.NewCNIConfigWithCacheDir([]string{cniPath}, t.TempDir(), nil)}
	require.NoError(t, schema1.Copy(w.cacheDir))
	for _, att := range schema1.Attachments {
		w.addNetns(filepath.Base(att.NetNS))
	}
	return &s1Node{world: w, list: w.catenaList(schema1.Network, "1.1.0", w.bridgeDelegate(), portmapDelegate, tuningDelegate)}
}

// replay runs, with the plugins themselves, the ADD of every step that att's
// record says succeeded and still holds, in order, each with the exact
// config cached in the record and the previous step's real result as
// prevResult in its version; their DELs are run at cleanup. The IP that
// host-local hands out must be the recorded one.
func (n *s1Node) replay(att schema1.Attachment) {
	t := n.t
	t.Helper()
	raw, err := os.ReadFile(schema1.RecordPath(n.cacheDir, att.ContainerID))
	require.NoError(t, err)
	lines := bytes.Split(bytes.TrimSpace(raw), []byte("\n"))
	var env struct {
		Record oldRecord `json:"record"`
	}
	require.NoError(t, json.Unmarshal(lines[len(lines)-1], &env))
	rec := env.Record
	require.Equal(t, att.NetNS, rec.NetNS)
	if rec.Created.After(n.newest) {
		n.newest = rec.Created
	}
	var prev types.Result
	for _, st := range rec.Steps {
		if st.State != "added" && st.State != "del-failed" {
			continue // never ran, undone, or its outcome is unknown
		}
		var conf map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(st.Config, &conf))
		if prev != nil {
			conv, err := prev.GetAsVersion(st.CNIVersion)
			require.NoError(t, err)
			conf["prevResult"], err = json.Marshal(conv)
			require.NoError(t, err)
		}
		stdin, err := json.Marshal(conf)
		require.NoError(t, err)
		plugin := filepath.Join(cniPath, st.Type)
		args := func(verb string) *invoke.Args {
			return &invoke.Args{Command: verb, ContainerID: att.ContainerID, NetNS: rec.NetNS, IfName: schema1.IfName,
				PluginArgsStr: rec.Args, Path: cniPath}
		}
		t.Cleanup(func() { _ = invoke.ExecPluginWithoutResult(bg, plugin, stdin, args("DEL"), nil) })
		res, err := invoke.ExecPluginWithResult(bg, plugin, stdin, args("ADD"), nil)
		require.NoError(t, err, "%s: replaying %s's ADD", att.ContainerID, st.Type)
		if prev == nil {
			r, err := current.NewResultFromResult(res)
			require.NoError(t, err)
			require.Len(t, r.IPs, 1)
			require.Equal(t, att.IP, r.IPs[0].Address.String(), "%s: host-local handed out the recorded IP", att.ContainerID)
		}
		prev = res
	}
}

// rt is the runtime's view of att's attachment.
func (n *s1Node) rt(containerID, netns string, hostPort int) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: containerID, NetNS: netns, IfName: schema1.IfName,
		Args:           [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "upgrade"}, {"K8S_POD_NAME", containerID}},
		CapabilityArgs: portMapping(hostPort)}
}

// delAtCleanup DELs a pod this build's catena added, at cleanup: through
// catena, then (should catena be what the test caught failing) with the
// same delegates run by libcni itself.
func (n *s1Node) delAtCleanup(rt *libcni.RuntimeConf) {
	plain := n.plainList(schema1.Network, "1.1.0", n.bridgeDelegate(), portmapDelegate, tuningDelegate)
	byLibcni := libcni.NewCNIConfigWithCacheDir([]string{cniPath}, n.t.TempDir(), nil)
	n.t.Cleanup(func() {
		_ = n.cni.DelNetworkList(bg, n.list, rt)
		_ = byLibcni.DelNetworkList(bg, plain, rt)
	})
}

// holds reports what of an attachment is still on the node: host-local's
// file for its IP, its iptables rules (by container ID or IP), its record
// and its pending marker.
func (n *s1Node) holds(containerID, ip string) (ipFile, rules, record, marker bool) {
	addr := strings.TrimSuffix(ip, "/24")
	for _, f := range n.ipamFiles(schema1.Network) {
		ipFile = ipFile || f == addr
	}
	byIP := regexp.MustCompile(regexp.QuoteMeta(addr) + `\b`)
	save := run(n.t, "iptables-save")
	rules = strings.Contains(save, containerID) || byIP.MatchString(save)
	_, err := os.Lstat(schema1.RecordPath(n.cacheDir, containerID))
	record = err == nil
	_, err = os.Lstat(schema1.PendingPath(n.cacheDir, containerID))
	marker = err == nil
	return ipFile, rules, record, marker
}

// assertReleased: nothing of the attachment is left, and its netns (if it
// still exists) has no eth0.
func (n *s1Node) assertReleased(containerID, ip, netns string) {
	n.t.Helper()
	ipFile, rules, record, marker := n.holds(containerID, ip)
	assert.False(n.t, ipFile, "%s: host-local still holds %s", containerID, ip)
	assert.False(n.t, rules, "%s: iptables still mentions it or %s", containerID, ip)
	assert.False(n.t, record, "%s: its record is left", containerID)
	assert.False(n.t, marker, "%s: its pending marker is left", containerID)
	if _, err := os.Stat(netns); err == nil {
		assert.Empty(n.t, n.sandboxAddrsOf(netns, schema1.IfName), "%s: eth0 left in its netns", containerID)
	}
}

// dirEntries lists a directory under the cache dir (none if it is gone).
func (n *s1Node) dirEntries(rel string) []string {
	n.t.Helper()
	entries, err := os.ReadDir(filepath.Join(n.cacheDir, rel))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(n.t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// markerPrefix is the first 3 bytes of a container's pending marker ("" if
// it has none or it is shorter).
func (n *s1Node) markerPrefix(containerID string) string {
	n.t.Helper()
	data, err := os.ReadFile(schema1.PendingPath(n.cacheDir, containerID))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	require.NoError(n.t, err)
	return string(data[:min(3, len(data))])
}
