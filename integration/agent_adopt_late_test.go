package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAgentAdoptsLateEntries is issue 24 §2.B: a pod ADDed through the
// primary after adoption's scan (an ADD that started before the runtime
// reloaded its config: go-cni copies its network list when a call starts)
// must still be adopted, by the next pass, though the generated file is
// already in place. The runtime stand-in is libcni with a private cache
// dir, as go-cni calls it: ADD a through the primary; `install --once`;
// ADD b through the primary's (old, in-memory) list; `install --once`
// again; DEL both through Catena's file. Nothing of a or b may be held.
func TestAgentAdoptsLateEntries(t *testing.T) {
	w := newWorld(t)
	net := "late-" + w.id
	confDir, libcniDir := t.TempDir(), t.TempDir()
	resultsDir := filepath.Join(libcniDir, "results")
	primary := w.plainList(net, "1.1.0", w.bridgeDelegate())
	writeAtomic(t, filepath.Join(confDir, primaryName), primary.Bytes)
	cni := libcni.NewCNIConfigWithCacheDir([]string{cniPath}, libcniDir, nil)
	pods := map[string]string{"a": w.addNetns(w.id + "-a"), "b": w.addNetns(w.id + "-b")}
	rt := func(name string) *libcni.RuntimeConf {
		return &libcni.RuntimeConf{ContainerID: w.id + "-" + name, NetNS: pods[name], IfName: "eth0", CacheDir: libcniDir}
	}
	installOnce := func() string {
		n := &agentNode{t: t, w: w, src: binDirOf(t), confDir: confDir}
		out, errOut, code := n.agent("install", "--once", "--cni-conf-dir", confDir, "--cni-bin-dir", "",
			"--cache-dir", w.cacheDir, "--results-dir", resultsDir, "--lock-timeout", "10s")
		require.Zero(t, code, "install --once: %s%s", out, errOut)
		return out
	}

	_, err := cni.AddNetworkList(context.Background(), primary, rt("a"))
	require.NoError(t, err, "ADD a through the primary")
	assert.Contains(t, installOnce(), "written")
	_, err = cni.AddNetworkList(context.Background(), primary, rt("b"))
	require.NoError(t, err, "ADD b through the primary's list, after the install")
	require.Len(t, w.sandboxAddrsOf(pods["b"], "eth0"), 1)
	assert.Contains(t, installOnce(), "already in place")

	gen, err := libcni.ConfListFromFile(filepath.Join(confDir, generatedName))
	require.NoError(t, err)
	require.Equal(t, "catena", gen.Plugins[0].Network.Type)
	for _, name := range []string{"a", "b"} {
		require.NoError(t, cni.DelNetworkList(context.Background(), gen, rt(name)), "DEL %s through Catena's file", name)
	}
	for name, ns := range pods {
		assert.Empty(t, w.sandboxAddrsOf(ns, "eth0"), "%s's eth0 is still there", name)
	}
	assert.Empty(t, w.ipamFiles(net), "IPs still held")
	assert.Empty(t, w.hostVeths(), "veths still there")
	assert.Empty(t, w.records(net), "records left")
	left, err := os.ReadDir(resultsDir)
	require.NoError(t, err)
	assert.Empty(t, left, "libcni entries left")
	t.Logf("ADD a, install, ADD b (old list), install, DEL a, b through catena: %d IPs, %d veths, %d records held",
		len(w.ipamFiles(net)), len(w.hostVeths()), len(w.records(net)))
}
