package libcnientry

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/internal/libcnitest"
	"github.com/catena-cni/catena/libchain"
)

// world is libcnitest's World with this package's helpers.
type world struct{ *libcnitest.World }

func newWorld(t *testing.T) *world { return &world{libcnitest.NewWorld(t)} }

// atDel returns the AtDel the catena plugin builds from libcniResultsDir,
// logging at debug level into w.Log.
func (w *world) atDel(t *testing.T) *AtDel {
	t.Helper()
	d, err := NewAtDel(w.ResultsDir(), nil, slog.New(slog.NewTextHandler(w.Log, &slog.HandlerOptions{Level: slog.LevelDebug})))
	require.NoError(t, err)
	return d
}

// engine is catena's engine on w's cache dir with adoption at DEL; today's
// primary (one bridge on cni1) is not the one of the cached entries.
func (w *world) engine(t *testing.T, x libchain.Executor) (*libchain.Engine, libchain.Request) {
	t.Helper()
	today := `{"cniVersion":"1.0.0","name":"k8s-pod-net","plugins":[{"type":"bridge","bridge":"cni1"}]}`
	eng := &libchain.Engine{Store: w.Store, Exec: x, Orphans: w.atDel(t), Log: slog.New(slog.NewTextHandler(w.Log, nil))}
	return eng, libchain.Request{Conf: libcnitest.CatenaConf(t, today, w.CatenaDir), Args: libchain.RuntimeArgs{
		ContainerID: libcnitest.TestPod.ContainerID, IfName: "eth0", Path: "/opt/cni/bin"}}
}

func (w *world) entryPath() string {
	return filepath.Join(w.ResultsDir(), "k8s-pod-net-"+libcnitest.TestPod.ContainerID+"-eth0")
}

// TestDelAdoptsLibcniEntry: the window the agent's passes leave: a pod ADDed
// through the primary and never adopted by a pass. Catena's DEL, finding
// no record, invokes the same delegates, in the same order, with the same
// stdin as libcni's own DEL through the cached primary would, then removes
// libcni's entry; no record is left. A repeated DEL does nothing.
func TestDelAdoptsLibcniEntry(t *testing.T) {
	ref := t.TempDir()
	libcnitest.AddThroughLibcni(t, libcnitest.PrimaryConf, ref, libcnitest.TestPod)
	want := libcnitest.DelThroughLibcni(t, ref, "k8s-pod-net", libcnitest.TestPod)
	require.Len(t, want, 3)

	w := newWorld(t)
	libcnitest.AddThroughLibcni(t, libcnitest.PrimaryConf, w.LibcniDir, libcnitest.TestPod)
	x := &libcnitest.FakeExecutor{}
	eng, req := w.engine(t, x)
	require.NoError(t, eng.Del(context.Background(), req))
	require.Len(t, x.Calls, len(want))
	for i := range want {
		assert.Equal(t, want[i].Type, x.Calls[i].Type)
		assert.JSONEq(t, want[i].Stdin, x.Calls[i].Stdin, "DEL %d (%s)", i, want[i].Type)
	}
	_, err := w.Store.Load(libcnitest.TestKey)
	require.ErrorIs(t, err, cache.ErrNotFound)
	_, err = os.Lstat(w.entryPath())
	require.ErrorIs(t, err, os.ErrNotExist, "libcni's entry of a torn-down attachment left: %s", w.Log)

	x.Calls = nil
	require.NoError(t, eng.Del(context.Background(), req), "repeated DEL")
	assert.Empty(t, x.Calls)
}

// TestDelAdoptionSkips: a DEL with no record adopts nothing it cannot use
// (the Adopter's reasons, plus an entry of another attachment under the
// same file name) and leaves the entry alone; the DEL succeeds with
// nothing invoked, as before. A missing entry or results dir is silent.
func TestDelAdoptionSkips(t *testing.T) {
	base := libcnitest.RealEntry(t)
	cases := []struct {
		name   string
		create func(t *testing.T, path string) // nil: write base changed by mutate
		mutate func(m map[string]any)
		reason string
	}{
		{name: "made through catena", reason: "made through catena", mutate: libcnitest.WithConfig(
			`{"cniVersion":"1.0.0","name":"k8s-pod-net","plugins":[{"type":"catena","delegates":[{"type":"bridge"}]}]}`)},
		{name: "symlink", reason: "is a symlink", create: libcnitest.SymlinkEntry},
		{name: "directory", reason: "is a directory", create: libcnitest.DirEntry},
		{name: "fifo", reason: "is not a regular file", create: libcnitest.FifoEntry},
		{name: "too large", reason: "too large", create: func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path, nil, 0o600))
			require.NoError(t, os.Truncate(path, MaxSize+1))
		}},
		{name: "junk", reason: "not a libcni cache entry", create: libcnitest.JunkEntry},
		{name: "legacy", reason: `kind "" is not "cniCacheV1"`, mutate: func(m map[string]any) { delete(m, "kind") }},
		{name: "no result", reason: "no cached result", mutate: func(m map[string]any) { delete(m, "result") }},
		{name: "another container", reason: "file name does not match its content", mutate: func(m map[string]any) { m["containerId"] = "c2" }},
		{name: "another split of the name", reason: `an entry of container "pod-a", ifname "0123456789abcdef-eth0"`,
			mutate: func(m map[string]any) { m["containerId"], m["ifName"] = "pod-a", "0123456789abcdef-eth0" }},
		{name: "type with slash", reason: `type "../bridge" is not a plain binary name`,
			mutate: libcnitest.WithConfig(`{"cniVersion":"1.0.0","name":"k8s-pod-net","plugins":[{"type":"../bridge"}]}`)},
		{name: "renamed network", reason: `cached config is of network "elsewhere"`,
			mutate: libcnitest.WithConfig(`{"cniVersion":"1.0.0","name":"elsewhere","plugins":[{"type":"bridge"}]}`)},
		{name: "NUL in CNI_ARGS", reason: "cached CNI_ARGS hold a NUL byte",
			mutate: func(m map[string]any) { m["cniArgs"] = [][2]string{{"K8S_POD_NAME", "a\x00b"}} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			require.NoError(t, os.MkdirAll(w.ResultsDir(), 0o700))
			path := w.entryPath()
			if c.create != nil {
				c.create(t, path)
			} else {
				m := map[string]any{}
				for k, v := range base {
					m[k] = v
				}
				c.mutate(m)
				require.NoError(t, os.WriteFile(path, libcnitest.EncodeEntry(t, m), 0o600))
			}
			x := &libcnitest.FakeExecutor{}
			eng, req := w.engine(t, x)
			require.NoError(t, eng.Del(context.Background(), req))
			assert.Empty(t, x.Calls)
			assert.Contains(t, w.Log.String(), "is not adopted")
			assert.Contains(t, strings.ReplaceAll(w.Log.String(), `\"`, `"`), c.reason, "the text handler quotes the reason")
			_, err := os.Lstat(path)
			require.NoError(t, err, "an entry not adopted is the runtime's to remove")
			_, err = w.Store.Load(libcnitest.TestKey)
			require.ErrorIs(t, err, cache.ErrNotFound)
		})
	}
	t.Run("no entry, no results dir", func(t *testing.T) {
		w := newWorld(t)
		for range 2 {
			x := &libcnitest.FakeExecutor{}
			eng, req := w.engine(t, x)
			require.NoError(t, eng.Del(context.Background(), req))
			assert.Empty(t, x.Calls)
			require.NoError(t, os.MkdirAll(w.ResultsDir(), 0o700))
		}
		assert.NotContains(t, w.Log.String(), "adopt")
	})
}

// TestAtDelRefusesBadInput: a relative results dir, and a key whose file
// name would leave the results dir, are errors; nothing is read.
func TestAtDelRefusesBadInput(t *testing.T) {
	_, err := NewAtDel("var/lib/cni/results", nil, nil)
	require.ErrorContains(t, err, "not an absolute path")
	d, err := NewAtDel("/nonexistent/results", afero.NewMemMapFs(), nil)
	require.NoError(t, err)
	for _, key := range []cache.Key{
		{Network: "..", ContainerID: "c1", IfName: "eth0"},
		{Network: "n", ContainerID: "../../etc", IfName: "eth0"},
		{Network: "n", ContainerID: "c1", IfName: "a/b"},
	} {
		o, err := d.FindOrphan(key)
		assert.ErrorContains(t, err, "invalid attachment", "%v", key)
		assert.Nil(t, o)
	}
}

// TestDelAdoptionRefusesUntrusted: at DEL time: an entry
// another uid owns or group or others can write, or any entry of a results
// dir anybody can write, is refused and logged; nothing is torn down.
func TestDelAdoptionRefusesUntrusted(t *testing.T) {
	libcnitest.RequireRootForChown(t)
	cases := []struct {
		name       string
		uid        int
		perm, dir  os.FileMode
		wantReason string
	}{
		{"entry of another uid", libcnitest.Nobody, 0o600, 0o700, "is owned by uid 65534"},
		{"entry writable by others", 0, 0o662, 0o700, "is writable by group or others"},
		{"results dir writable by others", 0, 0o600, 0o777, "writable by group or others"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			require.NoError(t, os.MkdirAll(w.ResultsDir(), 0o700))
			name := libcnitest.Plant(t, w.ResultsDir(), libcnitest.TestPod.ContainerID, c.uid, c.perm)
			require.NoError(t, os.Chmod(w.ResultsDir(), c.dir))
			x := &libcnitest.FakeExecutor{}
			eng, req := w.engine(t, x)
			require.NoError(t, eng.Del(context.Background(), req))
			assert.Empty(t, x.Calls)
			assert.Contains(t, w.Log.String(), "is refused")
			assert.Contains(t, w.Log.String(), c.wantReason)
			_, err := os.Lstat(filepath.Join(w.ResultsDir(), name))
			require.NoError(t, err)
			_, err = w.Store.Load(libcnitest.TestKey)
			require.ErrorIs(t, err, cache.ErrNotFound)
		})
	}
}
