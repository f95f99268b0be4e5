package adopt

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain"
)

// atDel returns the AtDel the catena plugin builds from libcniResultsDir,
// logging at debug level into w.log.
func (w *world) atDel(t *testing.T) *AtDel {
	t.Helper()
	d, err := NewAtDel(w.resultsDir(), nil, slog.New(slog.NewTextHandler(w.log, &slog.HandlerOptions{Level: slog.LevelDebug})))
	require.NoError(t, err)
	return d
}

// engine is catena's engine on w's cache dir with adoption at DEL; today's
// primary (one bridge on cni1) is not the one of the cached entries.
func (w *world) engine(t *testing.T, x libchain.Executor) (*libchain.Engine, libchain.Request) {
	t.Helper()
	today := `{"cniVersion":"1.0.0","name":"k8s-pod-net","plugins":[{"type":"bridge","bridge":"cni1"}]}`
	eng := &libchain.Engine{Store: w.store, Exec: x, Orphans: w.atDel(t), Log: slog.New(slog.NewTextHandler(w.log, nil))}
	return eng, libchain.Request{Conf: catenaConf(t, today, w.catenaDir), Args: libchain.RuntimeArgs{
		ContainerID: testPod.ContainerID, IfName: "eth0", Path: "/opt/cni/bin"}}
}

func (w *world) entryPath() string {
	return filepath.Join(w.resultsDir(), "k8s-pod-net-"+testPod.ContainerID+"-eth0")
}

// failingExec fails every DEL of one delegate type.
type failingExec struct {
	fakeExecutor
	fail string
}

func (f *failingExec) Run(ctx context.Context, c libchain.Call) error {
	if err := f.fakeExecutor.Run(ctx, c); err != nil {
		return err
	}
	if c.Verb == "DEL" && c.Type == f.fail {
		return errors.New(c.Type + " failed on purpose")
	}
	return nil
}

// TestDelAdoptsLibcniEntry is issue 24 §2.B's last window: a pod ADDed
// through the primary and never adopted by a pass. Catena's DEL, finding
// no record, invokes the same delegates, in the same order, with the same
// stdin as libcni's own DEL through the cached primary would, then removes
// libcni's entry; no record is left. A repeated DEL does nothing.
func TestDelAdoptsLibcniEntry(t *testing.T) {
	ref := t.TempDir()
	addThroughLibcni(t, primaryConf, ref, testPod)
	want := delThroughLibcni(t, ref, "k8s-pod-net", testPod)
	require.Len(t, want, 3)

	w := newWorld(t)
	addThroughLibcni(t, primaryConf, w.libcniDir, testPod)
	x := &fakeExecutor{}
	eng, req := w.engine(t, x)
	require.NoError(t, eng.Del(context.Background(), req))
	require.Len(t, x.calls, len(want))
	for i := range want {
		assert.Equal(t, want[i].Type, x.calls[i].Type)
		assert.JSONEq(t, want[i].Stdin, x.calls[i].Stdin, "DEL %d (%s)", i, want[i].Type)
	}
	_, err := w.store.Load(testKey)
	require.ErrorIs(t, err, cache.ErrNotFound)
	_, err = os.Lstat(w.entryPath())
	require.ErrorIs(t, err, os.ErrNotExist, "libcni's entry of a torn-down attachment left: %s", w.log)

	x.calls = nil
	require.NoError(t, eng.Del(context.Background(), req), "repeated DEL")
	assert.Empty(t, x.calls)
}

// TestDelAdoptionSkips: a DEL with no record adopts nothing it cannot use
// (the Adopter's reasons, plus an entry of another attachment under the
// same file name) and leaves the entry alone; the DEL succeeds with
// nothing invoked, as before. A missing entry or results dir is silent.
func TestDelAdoptionSkips(t *testing.T) {
	base := realEntry(t)
	cases := []struct {
		name   string
		create func(t *testing.T, path string) // nil: write base changed by mutate
		mutate func(m map[string]any)
		reason string
	}{
		{name: "made through catena", reason: "made through catena", mutate: withConfig(
			`{"cniVersion":"1.0.0","name":"k8s-pod-net","plugins":[{"type":"catena","delegates":[{"type":"bridge"}]}]}`)},
		{name: "symlink", reason: "is a symlink", create: symlinkEntry},
		{name: "directory", reason: "is a directory", create: dirEntry},
		{name: "fifo", reason: "is not a regular file", create: fifoEntry},
		{name: "too large", reason: "too large", create: func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path, nil, 0o600))
			require.NoError(t, os.Truncate(path, maxEntrySize+1))
		}},
		{name: "junk", reason: "not a libcni cache entry", create: junkEntry},
		{name: "legacy", reason: `kind "" is not "cniCacheV1"`, mutate: func(m map[string]any) { delete(m, "kind") }},
		{name: "no result", reason: "no cached result", mutate: func(m map[string]any) { delete(m, "result") }},
		{name: "another container", reason: "file name does not match its content", mutate: func(m map[string]any) { m["containerId"] = "c2" }},
		{name: "another split of the name", reason: `an entry of container "pod-a", ifname "0123456789abcdef-eth0"`,
			mutate: func(m map[string]any) { m["containerId"], m["ifName"] = "pod-a", "0123456789abcdef-eth0" }},
		{name: "type with slash", reason: `type "../bridge" is not a plain binary name`,
			mutate: withConfig(`{"cniVersion":"1.0.0","name":"k8s-pod-net","plugins":[{"type":"../bridge"}]}`)},
		{name: "renamed network", reason: `cached config is of network "elsewhere"`,
			mutate: withConfig(`{"cniVersion":"1.0.0","name":"elsewhere","plugins":[{"type":"bridge"}]}`)},
		{name: "NUL in CNI_ARGS", reason: "cached CNI_ARGS hold a NUL byte",
			mutate: func(m map[string]any) { m["cniArgs"] = [][2]string{{"K8S_POD_NAME", "a\x00b"}} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			require.NoError(t, os.MkdirAll(w.resultsDir(), 0o700))
			path := w.entryPath()
			if c.create != nil {
				c.create(t, path)
			} else {
				m := map[string]any{}
				for k, v := range base {
					m[k] = v
				}
				c.mutate(m)
				require.NoError(t, os.WriteFile(path, encodeEntry(t, m), 0o600))
			}
			x := &fakeExecutor{}
			eng, req := w.engine(t, x)
			require.NoError(t, eng.Del(context.Background(), req))
			assert.Empty(t, x.calls)
			assert.Contains(t, w.log.String(), "is not adopted")
			assert.Contains(t, strings.ReplaceAll(w.log.String(), `\"`, `"`), c.reason, "the text handler quotes the reason")
			_, err := os.Lstat(path)
			require.NoError(t, err, "an entry not adopted is the runtime's to remove")
			_, err = w.store.Load(testKey)
			require.ErrorIs(t, err, cache.ErrNotFound)
		})
	}
	t.Run("no entry, no results dir", func(t *testing.T) {
		w := newWorld(t)
		for range 2 {
			x := &fakeExecutor{}
			eng, req := w.engine(t, x)
			require.NoError(t, eng.Del(context.Background(), req))
			assert.Empty(t, x.calls)
			require.NoError(t, os.MkdirAll(w.resultsDir(), 0o700))
		}
		assert.NotContains(t, w.log.String(), "adopt")
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

// TestDelAdoptionRefusesUntrusted is issue 24 §2.I at DEL time: an entry
// another uid owns or group or others can write, or any entry of a results
// dir anybody can write, is refused and logged; nothing is torn down.
func TestDelAdoptionRefusesUntrusted(t *testing.T) {
	requireRootForChown(t)
	cases := []struct {
		name       string
		uid        int
		perm, dir  os.FileMode
		wantReason string
	}{
		{"entry of another uid", nobody, 0o600, 0o700, "is owned by uid 65534"},
		{"entry writable by others", 0, 0o662, 0o700, "is writable by group or others"},
		{"results dir writable by others", 0, 0o600, 0o777, "writable by group or others"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			require.NoError(t, os.MkdirAll(w.resultsDir(), 0o700))
			name := w.plant(t, testPod.ContainerID, c.uid, c.perm)
			require.NoError(t, os.Chmod(w.resultsDir(), c.dir))
			x := &fakeExecutor{}
			eng, req := w.engine(t, x)
			require.NoError(t, eng.Del(context.Background(), req))
			assert.Empty(t, x.calls)
			assert.Contains(t, w.log.String(), "is refused")
			assert.Contains(t, w.log.String(), c.wantReason)
			_, err := os.Lstat(filepath.Join(w.resultsDir(), name))
			require.NoError(t, err)
			_, err = w.store.Load(testKey)
			require.ErrorIs(t, err, cache.ErrNotFound)
		})
	}
}

// lockHook runs before, once, ahead of the first Lock: the DEL that gets
// the attachment's lock while an Adopter pass has read the entry.
type lockHook struct {
	cache.Store
	before func()
}

func (s *lockHook) Lock(ctx context.Context, key cache.Key, who cache.Holder) (cache.Unlocker, error) {
	if b := s.before; b != nil {
		s.before = nil
		b()
	}
	return s.Store.Lock(ctx, key, who)
}

// TestDelAdoptionRacesAdopter: an Adopter pass that read the entry before
// a DEL took the attachment's lock finds, once it gets the lock, the entry
// gone, and drops the record it wrote: the attachment is not adopted
// twice, and no later pass brings it back. If the DEL fails, its record
// stays as the DEL left it (needs-teardown), and the pass finds it.
func TestDelAdoptionRacesAdopter(t *testing.T) {
	for _, fail := range []string{"", "portmap"} {
		t.Run("failing "+fail, func(t *testing.T) {
			w := newWorld(t)
			addThroughLibcni(t, primaryConf, w.libcniDir, testPod)
			x := &failingExec{fail: fail}
			eng, req := w.engine(t, x)
			var delErr error
			store := &lockHook{
				Store:  cache.NewDiskStore(afero.NewOsFs(), w.catenaDir, cache.NewFlockLocker(filepath.Join(w.catenaDir, cache.LocksDir))),
				before: func() { delErr = eng.Del(context.Background(), req) },
			}
			a, err := New(Options{ResultsDir: w.resultsDir(), CacheDir: w.catenaDir, Store: store,
				Logger: slog.New(slog.NewTextHandler(w.log, nil))})
			require.NoError(t, err)

			rep := w.pass(t, a)
			require.NotEmpty(t, x.calls, "the DEL ran inside the pass")
			if fail == "" {
				require.NoError(t, delErr)
				assert.Zero(t, rep.Adopted)
				require.Len(t, rep.Skipped, 1)
				assert.Contains(t, rep.Skipped[0], "deleted by the runtime during adoption")
				_, err = w.store.Load(testKey)
				require.ErrorIs(t, err, cache.ErrNotFound, "a torn-down attachment adopted again")
				assert.Equal(t, Report{}, w.pass(t, a))
				return
			}
			require.Error(t, delErr)
			assert.Equal(t, Report{AlreadyPresent: 1}, rep)
			rec, err := w.store.Load(testKey)
			require.NoError(t, err)
			assert.Equal(t, cache.PhaseNeedsTeardown, rec.Phase, "the DEL's record overwritten")
			assert.True(t, strings.Contains(rec.LastError, "portmap failed on purpose"), rec.LastError)
			_, err = os.Lstat(w.entryPath())
			require.NoError(t, err, "the entry of an attachment still held removed")
		})
	}
}
