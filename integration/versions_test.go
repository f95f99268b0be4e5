package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/types/create"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVersionMatrix runs Catena at each cniVersion a runtime may use, with
// the real chain [bridge + host-local, tuning, portmap]. tuning is pinned to
// an older version than Catena's: the reference plugins refuse a prevResult
// of any other version than their own, so its ADD succeeds only if Catena
// converted the prevResult down to it, and portmap's only if Catena
// converted tuning's result back up.
//
//   - ADD's result parses at the requested version, with the IP.
//   - CHECK passes from 0.4.0 on; at 0.3.1 libcni refuses to send it and
//     Catena, called directly, refuses it with code 1 (incompatible version).
//   - DEL leaves nothing.
func TestVersionMatrix(t *testing.T) {
	for _, tc := range []struct{ catena, pinned string }{
		{"0.3.1", "0.3.0"},
		{"0.4.0", "0.3.1"},
		{"1.0.0", "0.4.0"},
		{"1.1.0", "0.3.1"},
	} {
		t.Run(tc.catena, func(t *testing.T) {
			w := newWorld(t)
			net := "ver-" + w.id
			tuning := fmt.Sprintf(`{"type":"tuning","cniVersion":%q,"sysctl":{"net.core.somaxconn":"1024"}}`, tc.pinned)
			list := w.catenaList(net, tc.catena, w.bridgeDelegate(), tuning, portmapDelegate)
			port := hostPort()
			rt := w.rt(w.id+"-v", portMapping(int(port)))

			res, err := w.cni.AddNetworkList(bg, list, rt)
			require.NoError(t, err)
			assert.Equal(t, tc.catena, res.Version())
			raw, err := json.Marshal(res)
			require.NoError(t, err)
			reparsed, err := create.Create(tc.catena, raw)
			require.NoError(t, err, "the result parses at %s: %s", tc.catena, raw)
			assert.Equal(t, tc.catena, reparsed.Version())
			assert.Contains(t, string(raw), w.ipamFiles(net)[0], "the result carries host-local's IP")
			assert.Equal(t, "1024\n", run(t, "ip", "netns", "exec", filepath.Base(w.netns), "cat", "/proc/sys/net/core/somaxconn"),
				"tuning, pinned to %s, ran", tc.pinned)
			assert.Positive(t, iptablesMentions(t, rt.ContainerID), "portmap ran after it")

			recs := w.records(net)
			require.Len(t, recs, 1)
			steps := readRecord(t, recs[0])["steps"].([]any)
			require.Len(t, steps, 3)
			for i, want := range []string{tc.catena, tc.pinned, tc.catena} {
				step := steps[i].(map[string]any)
				assert.Equal(t, want, step["cniVersion"], "delegate %d", i)
				stepResult, err := json.Marshal(step["result"])
				require.NoError(t, err)
				got, err := create.DecodeVersion(stepResult)
				require.NoError(t, err)
				assert.Equal(t, want, got, "delegate %d answered in its own version", i)
			}

			if tc.catena == "0.3.1" {
				require.ErrorContains(t, w.cni.CheckNetworkList(bg, list, rt), "does not support the CHECK command")
				err := invokeCatena(w, list, "CHECK", rt.ContainerID)
				var cniErr *types.Error
				require.True(t, errors.As(err, &cniErr), "a CNI error: %v", err)
				assert.Equal(t, uint(types.ErrIncompatibleCNIVersion), cniErr.Code, "%v", err)
			} else {
				require.NoError(t, w.cni.CheckNetworkList(bg, list, rt))
			}

			require.NoError(t, w.cni.DelNetworkList(bg, list, rt))
			assert.Empty(t, w.ipamFiles(net))
			assert.Empty(t, w.hostVeths())
			assert.Zero(t, iptablesMentions(t, rt.ContainerID))
			assert.Empty(t, w.records(net))
		})
	}
}

// invokeCatena calls the catena binary directly, bypassing libcni's own
// version checks, with the conflist's only plugin as a single config.
func invokeCatena(w *world, list *libcni.NetworkConfigList, verb, container string) error {
	w.t.Helper()
	conf, err := libcni.InjectConf(list.Plugins[0], map[string]any{"name": list.Name, "cniVersion": list.CNIVersion})
	require.NoError(w.t, err)
	return invoke.ExecPluginWithoutResult(bg, filepath.Join(cniPath, "catena"), conf.Bytes,
		&invoke.Args{Command: verb, ContainerID: container, NetNS: w.netns, IfName: "eth0", Path: cniPath}, nil)
}
