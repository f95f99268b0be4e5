package integration

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// direct runs the catena binary itself, as a runtime without libcni's own
// result cache would (libcni's file names cannot hold such IDs).
func direct(t *testing.T, w *world, net, verb string, rt *libcni.RuntimeConf, delegates ...string) error {
	t.Helper()
	conf := fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"type":"catena","cacheDir":%q,"delegateTimeout":"20s",
	  "lockTimeout":"10s","delegates":[%s]}`, net, w.cacheDir, strings.Join(delegates, ","))
	args := &invoke.Args{Command: verb, ContainerID: rt.ContainerID, NetNS: rt.NetNS, IfName: rt.IfName, Path: cniPath}
	plugin := filepath.Join(cniPath, "catena")
	if verb == "ADD" {
		_, err := invoke.ExecPluginWithResult(bg, plugin, []byte(conf), args, nil)
		return err
	}
	return invoke.ExecPluginWithoutResult(bg, plugin, []byte(conf), args, nil)
}

// longID is a legal container ID of n bytes, unique to w.
func longID(w *world, n int) string {
	id := w.id + "-"
	return id + strings.Repeat("a", n-len(id))
}

// TestLongContainerIDs: container IDs longer than a file
// name are legal. DEL without a record succeeds, and ADD, list and DEL work
// with the real binary and real plugins; the record's file name is a fixed
// length hash and the full key is inside it.
func TestLongContainerIDs(t *testing.T) {
	for _, n := range []int{300, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			w := newWorld(t)
			net := fmt.Sprintf("itlong%d", n)
			delegates := []string{w.bridgeDelegate(), tuningDelegate}
			c := w.newCtl(net, delegates...)
			rt := &libcni.RuntimeConf{ContainerID: longID(w, n), NetNS: w.netns, IfName: "eth0"}
			run := func(verb string) error { return direct(t, w, net, verb, rt, delegates...) }
			require.Len(t, rt.ContainerID, n)

			require.NoError(t, run("DEL"), "DEL without a record")

			require.NoError(t, run("ADD"))
			t.Cleanup(func() { _ = run("DEL") })
			require.Len(t, w.ipamFiles(net), 1)
			recs := w.records(net)
			require.Len(t, recs, 1)
			assert.Regexp(t, `^h-[0-9a-f]{64}\.json$`, filepath.Base(recs[0]))
			key := readRecord(t, recs[0])["key"].(map[string]any)
			assert.Equal(t, rt.ContainerID, key["containerID"], "the full key is in the record")

			out, stderr, code := c.run("list")
			require.Equal(t, 0, code, stderr)
			assert.True(t, hasRowPrefix(out, net, rt.ContainerID, "eth0", "complete"), out)
			_, stderr, code = c.run("show", rt.ContainerID)
			assert.Equal(t, 0, code, stderr)
			require.NoError(t, run("CHECK"))

			require.NoError(t, run("DEL"))
			assert.Empty(t, w.ipamFiles(net))
			assert.Empty(t, w.records(net))
			assert.Empty(t, w.hostVeths())
			entries, err := os.ReadDir(filepath.Join(w.cacheDir, "locks", net))
			require.NoError(t, err)
			var left []string
			for _, e := range entries {
				if e.Name() != ".barrier" { // the network's barrier stays (cache/barrier_flock.go)
					left = append(left, e.Name())
				}
			}
			assert.Empty(t, left, "no lock file is left")
			require.NoError(t, run("DEL"), "a second DEL")
			logs, _ := os.ReadFile(filepath.Join(w.cacheDir, "events", "events.jsonl"))
			assert.Equal(t, 5, bytes.Count(logs, []byte("\n")), "DEL, ADD, CHECK, DEL, DEL: %s", logs)
		})
	}
}
