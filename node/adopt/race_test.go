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
	"github.com/catena-cni/catena/internal/libcnitest"
	"github.com/catena-cni/catena/libchain"
	"github.com/catena-cni/catena/libchain/libcnientry"
)

// engine is catena's engine on w's cache dir with adoption at DEL, as the
// catena plugin builds it from libcniResultsDir; today's primary (one
// bridge on cni1) is not the one of the cached entries.
func (w *world) engine(t *testing.T, x libchain.Executor) (*libchain.Engine, libchain.Request) {
	t.Helper()
	atDel, err := libcnientry.NewAtDel(w.ResultsDir(), nil, slog.New(slog.NewTextHandler(w.Log, &slog.HandlerOptions{Level: slog.LevelDebug})))
	require.NoError(t, err)
	today := `{"cniVersion":"1.0.0","name":"k8s-pod-net","plugins":[{"type":"bridge","bridge":"cni1"}]}`
	eng := &libchain.Engine{Store: w.Store, Exec: x, Orphans: atDel, Log: slog.New(slog.NewTextHandler(w.Log, nil))}
	return eng, libchain.Request{Conf: libcnitest.CatenaConf(t, today, w.CatenaDir), Args: libchain.RuntimeArgs{
		ContainerID: libcnitest.TestPod.ContainerID, IfName: "eth0", Path: "/opt/cni/bin"}}
}

func (w *world) entryPath() string {
	return filepath.Join(w.ResultsDir(), "k8s-pod-net-"+libcnitest.TestPod.ContainerID+"-eth0")
}

// failingExec fails every DEL of one delegate type.
type failingExec struct {
	libcnitest.FakeExecutor
	fail string
}

func (f *failingExec) Run(ctx context.Context, c libchain.Call) error {
	if err := f.FakeExecutor.Run(ctx, c); err != nil {
		return err
	}
	if c.Verb == "DEL" && c.Type == f.fail {
		return errors.New(c.Type + " failed on purpose")
	}
	return nil
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
			libcnitest.AddThroughLibcni(t, libcnitest.PrimaryConf, w.LibcniDir, libcnitest.TestPod)
			x := &failingExec{fail: fail}
			eng, req := w.engine(t, x)
			var delErr error
			store := &lockHook{
				Store:  cache.NewDiskStore(afero.NewOsFs(), w.CatenaDir, cache.NewFlockLocker(filepath.Join(w.CatenaDir, cache.LocksDir))),
				before: func() { delErr = eng.Del(context.Background(), req) },
			}
			a, err := New(Options{ResultsDir: w.ResultsDir(), CacheDir: w.CatenaDir, Store: store,
				Logger: slog.New(slog.NewTextHandler(w.Log, nil))})
			require.NoError(t, err)

			rep := w.pass(t, a)
			require.NotEmpty(t, x.Calls, "the DEL ran inside the pass")
			if fail == "" {
				require.NoError(t, delErr)
				assert.Zero(t, rep.Adopted)
				require.Len(t, rep.Skipped, 1)
				assert.Contains(t, rep.Skipped[0], "deleted by the runtime during adoption")
				_, err = w.Store.Load(libcnitest.TestKey)
				require.ErrorIs(t, err, cache.ErrNotFound, "a torn-down attachment adopted again")
				assert.Equal(t, Report{}, w.pass(t, a))
				return
			}
			require.Error(t, delErr)
			assert.Equal(t, Report{AlreadyPresent: 1}, rep)
			rec, err := w.Store.Load(libcnitest.TestKey)
			require.NoError(t, err)
			assert.Equal(t, cache.PhaseNeedsTeardown, rec.Phase, "the DEL's record overwritten")
			assert.True(t, strings.Contains(rec.LastError, "portmap failed on purpose"), rec.LastError)
			_, err = os.Lstat(w.entryPath())
			require.NoError(t, err, "the entry of an attachment still held removed")
		})
	}
}
