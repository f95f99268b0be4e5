package adopt

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/internal/libcnitest"
	"github.com/catena-cni/catena/libchain"
)

// world is libcnitest's World with this package's helpers.
type world struct{ *libcnitest.World }

func newWorld(t *testing.T) *world { return &world{libcnitest.NewWorld(t)} }

// adopt runs Adopt as catena-agent does: no store injected, the real
// DiskStore and FlockLocker built from CacheDir.
func (w *world) adopt(t *testing.T, conf string) (Report, error) {
	t.Helper()
	return Adopt(context.Background(), Options{
		ResultsDir: w.ResultsDir(), CacheDir: w.CatenaDir, ConfList: []byte(conf),
		Logger: slog.New(slog.NewTextHandler(w.Log, nil)),
	})
}

// TestAdoptRecordsWhatLibcniSent: the adopted record holds, per delegate,
// exactly the config real libcni sent it on ADD (prevResult aside), every
// step added, the cached result on the last step and the record.
func TestAdoptRecordsWhatLibcniSent(t *testing.T) {
	w := newWorld(t)
	adds := libcnitest.AddThroughLibcni(t, libcnitest.PrimaryConf, w.LibcniDir, libcnitest.TestPod)
	require.Len(t, adds, 3)

	rep, err := w.adopt(t, libcnitest.PrimaryConf)
	require.NoError(t, err)
	assert.Equal(t, Report{Adopted: 1}, rep)

	key := cache.Key{Network: "k8s-pod-net", ContainerID: libcnitest.TestPod.ContainerID, IfName: "eth0"}
	rec, err := w.Store.Load(key)
	require.NoError(t, err)
	assert.Equal(t, cache.PhaseComplete, rec.Phase)
	assert.Equal(t, "1.0.0", rec.CNIVersion)
	assert.Equal(t, libcnitest.TestPod.NetNS, rec.NetNS)
	assert.Equal(t, "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-1", rec.Args)
	require.Len(t, rec.Steps, 3)
	for i, s := range rec.Steps {
		assert.Equal(t, i, s.Index)
		assert.Equal(t, adds[i].Type, s.Type)
		assert.Equal(t, cache.StepAdded, s.State)
		assert.Equal(t, "1.0.0", s.CNIVersion)
		assert.JSONEq(t, withoutPrevResult(t, adds[i].Stdin), string(s.Config), "delegate %d (%s)", i, s.Type)
	}
	assert.JSONEq(t, `{"portMappings":[{"containerPort":80,"hostPort":8080,"protocol":"tcp"}]}`, runtimeConfigOf(t, rec.Steps[1]),
		"bandwidth is declared false: it does not reach portmap")
	assert.JSONEq(t, `{"mac":"0a:58:0a:16:00:05"}`, runtimeConfigOf(t, rec.Steps[2]), "libcni replaces a static runtimeConfig")
	assert.Empty(t, runtimeConfigOf(t, rec.Steps[0]), "bridge declares no capability")
	assert.Empty(t, rec.Steps[0].Result)
	assert.Empty(t, rec.Steps[1].Result)
	require.NotEmpty(t, rec.Result)
	assert.JSONEq(t, string(rec.Result), string(rec.Steps[2].Result))
	assert.Contains(t, string(rec.Result), "10.22.0.5/24")
	assert.Contains(t, w.Log.String(), "adopted attachment")
	assert.Contains(t, w.Log.String(), key.String())
}

// TestAdoptedTeardownEqualsLibcniDel: Catena's DEL of an adopted attachment
// invokes the same delegates, in the same order, with the same stdin
// (prevResult included) as libcni's own DEL through the primary would; then
// the record is gone. Catena's current delegates differ (tuning is gone
// from today's primary) to show that the cached config is what counts.
func TestAdoptedTeardownEqualsLibcniDel(t *testing.T) {
	w := newWorld(t)
	libcnitest.AddThroughLibcni(t, libcnitest.PrimaryConf, w.LibcniDir, libcnitest.TestPod)
	_, err := w.adopt(t, libcnitest.PrimaryConf)
	require.NoError(t, err)

	today := `{"cniVersion":"1.0.0","name":"k8s-pod-net","plugins":[{"type":"bridge","bridge":"cni1"}]}`
	x := &libcnitest.FakeExecutor{}
	eng := &libchain.Engine{Store: w.Store, Exec: x}
	req := libchain.Request{Conf: libcnitest.CatenaConf(t, today, w.CatenaDir), Args: libchain.RuntimeArgs{
		ContainerID: libcnitest.TestPod.ContainerID, IfName: "eth0", Path: "/opt/cni/bin"}}
	require.NoError(t, eng.Del(context.Background(), req))

	want := libcnitest.DelThroughLibcni(t, w.LibcniDir, "k8s-pod-net", libcnitest.TestPod)
	require.Len(t, want, 3)
	require.Len(t, x.Calls, len(want))
	for i := range want {
		assert.Equal(t, want[i].Verb, x.Calls[i].Verb)
		assert.Equal(t, want[i].Type, x.Calls[i].Type)
		assert.JSONEq(t, want[i].Stdin, x.Calls[i].Stdin, "DEL %d (%s)", i, want[i].Type)
	}
	assert.Equal(t, []string{"tuning", "portmap", "bridge"}, []string{x.Calls[0].Type, x.Calls[1].Type, x.Calls[2].Type})
	_, err = w.Store.Load(cache.Key{Network: "k8s-pod-net", ContainerID: libcnitest.TestPod.ContainerID, IfName: "eth0"})
	require.ErrorIs(t, err, cache.ErrNotFound)
}

// TestAdoptIsIdempotent: a second pass finds the record and leaves it
// byte for byte alone.
func TestAdoptIsIdempotent(t *testing.T) {
	w := newWorld(t)
	libcnitest.AddThroughLibcni(t, libcnitest.PrimaryConf, w.LibcniDir, libcnitest.TestPod)
	other := libcnitest.TestPod
	other.ContainerID, other.IfName = "b1", "net1"
	libcnitest.AddThroughLibcni(t, libcnitest.PrimaryConf, w.LibcniDir, other)

	rep, err := w.adopt(t, libcnitest.PrimaryConf)
	require.NoError(t, err)
	require.Equal(t, Report{Adopted: 2}, rep)
	key := cache.Key{Network: "k8s-pod-net", ContainerID: "b1", IfName: "net1"}
	before, err := os.ReadFile(w.Store.Path(key))
	require.NoError(t, err)

	rep, err = w.adopt(t, libcnitest.PrimaryConf)
	require.NoError(t, err)
	assert.Equal(t, Report{AlreadyPresent: 2}, rep)
	after, err := os.ReadFile(w.Store.Path(key))
	require.NoError(t, err)
	assert.Equal(t, before, after)
}

func runtimeConfigOf(t *testing.T, s cache.Step) string {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(s.Config, &m))
	return string(m["runtimeConfig"])
}
