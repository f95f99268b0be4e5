package adopt

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/internal/libcnitest"
	"github.com/catena-cni/catena/libchain"
)

// TestAdoptedTeardownRunsNetworkDirPlugins: a pod ADDed through a primary
// whose network dir holds portmap (libcni v1.3 ran [bridge, portmap] but
// cached the file's list, [bridge]) is adopted with portmap as its last
// step, so that Catena's DEL makes the calls that the runtime's DEL through
// the primary (its loaded list: the file's plugins and the dir's) would:
// portmap, then bridge, with the same stdin. A cached list that sets
// loadOnlyInlinedPlugins never ran the dir: not added.
func TestAdoptedTeardownRunsNetworkDirPlugins(t *testing.T) {
	const portmap = `{"type":"portmap","capabilities":{"portMappings":true},"snat":true}`
	for _, tc := range []struct {
		name      string
		primary   string
		wantSteps []string
	}{
		{"dir read", `{"cniVersion":"1.0.0","name":"k8s-pod-net","plugins":[{"type":"bridge","bridge":"cni0"}]}`, []string{"bridge", "portmap"}},
		{"loadOnlyInlinedPlugins", `{"cniVersion":"1.0.0","name":"k8s-pod-net","loadOnlyInlinedPlugins":true,"plugins":[{"type":"bridge","bridge":"cni0"}]}`, []string{"bridge"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			confDir := t.TempDir()
			file := filepath.Join(confDir, "10-primary.conflist")
			require.NoError(t, os.WriteFile(file, []byte(tc.primary), 0o644))
			require.NoError(t, os.Mkdir(filepath.Join(confDir, "k8s-pod-net"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(confDir, "k8s-pod-net", "10-portmap.conf"), []byte(portmap), 0o644))
			loaded, err := libcni.NetworkConfFromFile(file) // as go-cni loads it
			require.NoError(t, err)

			x := &libcnitest.RecordingExec{}
			cni := libcni.NewCNIConfigWithCacheDir([]string{"/opt/cni/bin"}, w.LibcniDir, x)
			_, err = cni.AddNetworkList(context.Background(), loaded, libcnitest.TestPod.RT(w.LibcniDir))
			require.NoError(t, err)
			adds := x.Take()

			rep, err := Adopt(context.Background(), Options{
				ResultsDir: w.ResultsDir(), CacheDir: w.CatenaDir, ConfList: []byte(tc.primary),
				NetworkDirPlugins: [][]byte{[]byte(portmap)}, Logger: slog.New(slog.NewTextHandler(w.Log, nil)),
			})
			require.NoError(t, err)
			require.Equal(t, Report{Adopted: 1}, rep)
			rec, err := w.Store.Load(libcnitest.TestKey)
			require.NoError(t, err)
			var steps []string
			for i, s := range rec.Steps {
				steps = append(steps, s.Type)
				assert.JSONEq(t, withoutPrevResult(t, adds[i].Stdin), string(s.Config), "step %d: the config libcni sent", i)
			}
			require.Equal(t, tc.wantSteps, steps)

			del := &libcnitest.FakeExecutor{}
			eng := &libchain.Engine{Store: w.Store, Exec: del}
			req := libchain.Request{Conf: libcnitest.CatenaConf(t, tc.primary, w.CatenaDir), Args: libchain.RuntimeArgs{
				ContainerID: libcnitest.TestPod.ContainerID, IfName: "eth0", Path: "/opt/cni/bin"}}
			require.NoError(t, eng.Del(context.Background(), req))
			require.NoError(t, cni.DelNetworkList(context.Background(), loaded, libcnitest.TestPod.RT(w.LibcniDir)))
			want := x.Take()
			require.Len(t, del.Calls, len(want))
			for i := range want {
				assert.Equal(t, want[i].Type, del.Calls[i].Type, "DEL %d", i)
				assert.JSONEq(t, want[i].Stdin, del.Calls[i].Stdin, "DEL %d (%s)", i, want[i].Type)
			}
			_, err = w.Store.Load(libcnitest.TestKey)
			require.ErrorIs(t, err, cache.ErrNotFound)
		})
	}
}

// withoutPrevResult drops prevResult from a plugin's stdin.
func withoutPrevResult(t *testing.T, stdin string) string {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(stdin), &m))
	delete(m, "prevResult")
	out, err := json.Marshal(m)
	require.NoError(t, err)
	return string(out)
}
