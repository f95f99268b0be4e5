package integration

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDelAdoptsPrimaryAttachment: the window the agent's passes leave: a pod
// ADDed through the primary after the agent's last adoption pass (go-cni
// copied the network list when its call started) and DELeted through
// Catena's file before the next pass. Catena's DEL finds no record, reads
// the runtime's libcni entry of exactly that attachment (the generated file
// names the results dir: libcniResultsDir), adopts it and tears it down.
// The runtime stand-in is libcni with a private cache dir, as go-cni calls
// it: `install --once`; ADD through the primary's list; DEL through
// Catena's file, no pass in between. Nothing of the pod may be held.
func TestDelAdoptsPrimaryAttachment(t *testing.T) {
	w, net, confDir, libcniDir, primary := privateNode(t, "deladopt-")
	resultsDir := filepath.Join(libcniDir, "results")
	cni := libcni.NewCNIConfigWithCacheDir([]string{cniPath}, libcniDir, nil)
	ns := w.addNetns(w.id + "-a")
	rt := &libcni.RuntimeConf{ContainerID: w.id + "-a", NetNS: ns, IfName: "eth0", CacheDir: libcniDir}
	n := &agentNode{t: t, w: w, src: binDirOf(t), confDir: confDir}
	out, errOut, code := n.agent("install", "--once", "--cni-conf-dir", confDir, "--cni-bin-dir", "",
		"--cache-dir", w.cacheDir, "--results-dir", resultsDir, "--lock-timeout", "10s")
	require.Zero(t, code, "install --once: %s%s", out, errOut)
	require.Contains(t, out, "written")

	gen, err := libcni.ConfListFromFile(filepath.Join(confDir, generatedName))
	require.NoError(t, err)
	require.Equal(t, "catena", gen.Plugins[0].Network.Type)
	var plugin struct {
		LibcniResultsDir string `json:"libcniResultsDir"`
	}
	require.NoError(t, json.Unmarshal(gen.Plugins[0].Bytes, &plugin))
	assert.Equal(t, resultsDir, plugin.LibcniResultsDir, "the generated file names the results dir")

	_, err = cni.AddNetworkList(context.Background(), primary, rt)
	require.NoError(t, err, "ADD through the primary's list, after the install")
	require.Len(t, w.sandboxAddrsOf(ns, "eth0"), 1)
	require.Len(t, w.ipamFiles(net), 1)
	require.Len(t, w.hostVeths(), 1)
	require.Empty(t, w.records(net), "no adoption pass ran since the ADD")

	require.NoError(t, cni.DelNetworkList(context.Background(), gen, rt), "DEL through Catena's file")
	t.Logf("install, ADD through the primary, DEL through catena: %d IPs, %d veths, %d records held",
		len(w.ipamFiles(net)), len(w.hostVeths()), len(w.records(net)))
	assertPodsGone(t, w, net, resultsDir, map[string]string{"the pod": ns})

	// The runtime repeats a DEL: nothing is left to do, and it succeeds.
	require.NoError(t, cni.DelNetworkList(context.Background(), gen, rt), "second DEL")
}
