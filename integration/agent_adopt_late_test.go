package integration

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// privateNode is a world, its network named prefix+id, a conf dir holding
// the primary [bridge + host-local] and a private libcni cache dir.
func privateNode(t *testing.T, prefix string) (*world, string, string, string, *libcni.NetworkConfigList) {
	t.Helper()
	w := newWorld(t)
	net := prefix + w.id
	confDir, libcniDir := t.TempDir(), t.TempDir()
	primary := w.plainList(net, "1.1.0", w.bridgeDelegate())
	writeAtomic(t, filepath.Join(confDir, primaryName), primary.Bytes)
	return w, net, confDir, libcniDir, primary
}

// assertPodsGone: nothing of pods (netns path by name) is held on
// network net: no eth0, IP, veth, record or libcni entry in resultsDir.
func assertPodsGone(t *testing.T, w *world, net, resultsDir string, pods map[string]string) {
	t.Helper()
	for name, ns := range pods {
		assert.Empty(t, w.sandboxAddrsOf(ns, "eth0"), "%s's eth0 is still there", name)
	}
	assert.Empty(t, w.ipamFiles(net), "IPs still held")
	assert.Empty(t, w.hostVeths(), "veths still there")
	assert.Empty(t, w.records(net), "records left")
	left, err := os.ReadDir(resultsDir)
	require.NoError(t, err)
	assert.Empty(t, left, "libcni entries left")
}

// TestAgentAdoptsLateEntries: a pod ADDed through the
// primary after adoption's scan (an ADD that started before the runtime
// reloaded its config: go-cni copies its network list when a call starts)
// must still be adopted, by the next pass, though the generated file is
// already in place. The runtime stand-in is libcni with a private cache
// dir, as go-cni calls it: ADD a through the primary; `install --once`;
// ADD b through the primary's (old, in-memory) list; `install --once`
// again; DEL both through Catena's file. Nothing of a or b may be held.
func TestAgentAdoptsLateEntries(t *testing.T) {
	w, net, confDir, libcniDir, primary := privateNode(t, "late-")
	resultsDir := filepath.Join(libcniDir, "results")
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
	assertPodsGone(t, w, net, resultsDir, pods)
	t.Logf("ADD a, install, ADD b (old list), install, DEL a, b through catena: %d IPs, %d veths, %d records held",
		len(w.ipamFiles(net)), len(w.hostVeths()), len(w.records(net)))
}

// TestAgentRefusesUntrustedResultsDir: through the agent:
// `install --once` over a results dir anybody can write, holding an entry
// planted by uid 65534 that looks like the primary's, adopts nothing,
// writes no conflist, and says why (exit 1); once the dir is 0700 again,
// the planted entry, still owned by 65534, is refused and reported, the
// install goes on, and no record is made of it.
func TestAgentRefusesUntrustedResultsDir(t *testing.T) {
	w, net, confDir, libcniDir, primary := privateNode(t, "trust-")
	resultsDir := filepath.Join(libcniDir, "results")
	require.NoError(t, os.MkdirAll(resultsDir, 0o700))
	require.NoError(t, os.Chmod(resultsDir, 0o777))
	id := w.id + "-planted"
	entry := fmt.Sprintf(`{"kind":"cniCacheV1","containerId":%q,"ifName":"eth0","networkName":%q,"config":%q,`+
		`"result":{"cniVersion":"1.1.0","ips":[{"address":"10.99.0.2/24"}]}}`, id, net, base64.StdEncoding.EncodeToString(primary.Bytes))
	planted := filepath.Join(resultsDir, net+"-"+id+"-eth0")
	require.NoError(t, os.WriteFile(planted, []byte(entry), 0o644))
	require.NoError(t, os.Chown(planted, 65534, 65534))
	n := &agentNode{t: t, w: w, src: binDirOf(t), confDir: confDir}
	args := []string{"install", "--once", "--cni-conf-dir", confDir, "--cni-bin-dir", "", "--cache-dir", w.cacheDir, "--results-dir", resultsDir}

	out, errOut, code := n.agent(args...)
	assert.Equal(t, 1, code, "%s%s", out, errOut)
	assert.Contains(t, errOut, resultsDir)
	assert.Contains(t, errOut, "writable by group or others")
	_, err := os.Stat(filepath.Join(confDir, generatedName))
	assert.ErrorIs(t, err, os.ErrNotExist, "no conflist over an untrusted results dir")
	assert.Empty(t, w.records(net))

	require.NoError(t, os.Chmod(resultsDir, 0o700))
	out, errOut, code = n.agent(args...)
	require.Zero(t, code, "%s%s", out, errOut)
	assert.Contains(t, errOut, "libcni cache entry refused")
	assert.Contains(t, errOut, "is owned by uid 65534")
	assert.Contains(t, errOut, "refused=1")
	assert.Empty(t, w.records(net), "no record of the planted entry")
	for _, line := range strings.Split(errOut, "\n") {
		if strings.Contains(line, "entry refused") {
			t.Logf("0777 results dir: exit 1, nothing written; 0700 dir: %s", line)
		}
	}
}
