package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/node/nodeconf"
)

// pluginTypes lists a loaded conflist's plugin types, in the order libcni
// runs them on ADD.
func pluginTypes(list *libcni.NetworkConfigList) []string {
	var out []string
	for _, p := range list.Plugins {
		out = append(out, p.Network.Type)
	}
	return out
}

// sandboxMTU is ifname's MTU inside the world's netns, or 0 without it.
func (w *world) sandboxMTU(ifname string) int {
	w.t.Helper()
	link, err := w.netlinkAt(w.netns).LinkByName(ifname)
	if err != nil {
		return 0
	}
	return link.Attrs().MTU
}

// TestNetworkDirPluginsRunOnceThroughCatena: a primary whose network dir
// (<conf dir>/<network>/*.conf, libcni v1.3) holds tuning and portmap.
// libcni v1.3 (containerd 2.4's) loads the primary as [bridge, tuning,
// portmap]; the agent's generated file, loaded by the same libcni from the
// same conf dir, is [catena] alone (it sets loadOnlyInlinedPlugins, else
// tuning and portmap would run again after catena), and catena's delegates
// are those three in that order. An ADD through the real catena binary
// runs them in that order (catena's record), tuning's MTU and portmap's
// rules are in place; the DEL leaves no rule, address, veth, IP file,
// record or libcni cache entry.
func TestNetworkDirPluginsRunOnceThroughCatena(t *testing.T) {
	w := newWorld(t)
	net := "netdir-" + w.id
	confDir := t.TempDir()
	primary := filepath.Join(confDir, "10-primary.conflist")
	writeAtomic(t, primary, fmt.Appendf(nil, `{"cniVersion":"1.1.0","name":%q,"plugins":[%s]}`, net, w.bridgeDelegate()))
	require.NoError(t, os.Mkdir(filepath.Join(confDir, net), 0o755))
	writeAtomic(t, filepath.Join(confDir, net, "10-tuning.conf"), []byte(`{"cniVersion":"1.0.0","type":"tuning","mtu":1280}`))
	writeAtomic(t, filepath.Join(confDir, net, "20-portmap.conf"), []byte(portmapDelegate))

	alone, err := libcni.NetworkConfFromFile(primary)
	require.NoError(t, err)
	want := []string{"bridge", "tuning", "portmap"}
	require.Equal(t, want, pluginTypes(alone), "what the runtime runs for the primary alone")

	inst := &nodeconf.Installer{
		Fs: afero.NewOsFs(),
		Cfg: nodeconf.Config{ConfDir: confDir, ConfName: "00-catena.conflist", Catena: nodeconf.CatenaOptions{
			CacheDir: w.cacheDir, LockTimeout: 10 * time.Second, DelegateTimeout: 20 * time.Second,
		}},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	st, err := inst.Sync(bg)
	require.NoError(t, err)
	require.True(t, st.Ready, st.Reason)
	list, err := libcni.NetworkConfFromFile(filepath.Join(confDir, "00-catena.conflist"))
	require.NoError(t, err)
	require.Equal(t, []string{"catena"}, pluginTypes(list), "what the runtime runs with catena's file: catena alone")
	assert.Equal(t, net, list.Name)
	var catena struct {
		Delegates []struct {
			Type string `json:"type"`
		} `json:"delegates"`
	}
	require.NoError(t, json.Unmarshal(list.Plugins[0].Bytes, &catena))
	var dels []string
	for _, d := range catena.Delegates {
		dels = append(dels, d.Type)
	}
	require.Equal(t, want, dels, "catena's delegates: the primary's plugins, then the dir's, as libcni ordered them")

	container := w.id + "-nd"
	rt := w.rt(container, portMapping(int(hostPort())))
	_, err = w.cni.AddNetworkList(bg, list, rt)
	require.NoError(t, err)
	recs := w.records(net)
	require.Len(t, recs, 1)
	rec := readRecord(t, recs[0])
	steps, _ := rec["steps"].([]any)
	var ran []string
	for _, s := range steps {
		ran = append(ran, s.(map[string]any)["type"].(string))
	}
	assert.Equal(t, want, ran, "catena ran each plugin once, in the runtime's order")
	assert.Equal(t, 1280, w.sandboxMTU("eth0"), "tuning (from the network dir) ran after bridge")
	assert.Positive(t, iptablesMentions(t, container), "portmap (from the network dir) ran")
	assert.Len(t, w.ipamFiles(net), 1)
	assert.Len(t, w.hostVeths(), 1)

	require.NoError(t, w.cni.DelNetworkList(bg, list, rt))
	assert.Zero(t, iptablesMentions(t, container), "portmap's DEL ran")
	assert.Zero(t, w.sandboxMTU("eth0"), "bridge's DEL removed eth0")
	assert.Empty(t, w.ipamFiles(net))
	assert.Empty(t, w.hostVeths())
	assert.Empty(t, w.records(net))
	cached, err := w.cni.GetNetworkListCachedResult(list, rt)
	require.NoError(t, err)
	assert.Nil(t, cached, "libcni's cache entry is gone")
}
