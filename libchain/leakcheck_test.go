package libchain

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
)

// Leak checks shared by the crash and storage-fault tests. The fake
// executor is the world: what its delegates hold is read off its calls.

// testCacheDir is where the tests' DiskStores live, on an in-memory fs.
const testCacheDir = "/var/lib/cni/catena"

// heldBy returns the delegate types that hold something for containerID:
// those whose last ADD (failed or not: a failed ADD may leave partial
// state) came after their last DEL. A delegate that never got its request
// (its stdin gate failed) is not called at all.
func heldBy(f *fakeExec, containerID string) map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	held := map[string]bool{}
	for _, c := range f.calls {
		if c.ContainerID != containerID {
			continue
		}
		switch c.Verb {
		case "ADD":
			held[c.Type] = true
		case "DEL":
			delete(held, c.Type)
		}
	}
	return held
}

// forkWorld copies the fake world with every delegate healthy: each
// recovery of one crash starts from the same state.
func forkWorld(f *fakeExec) *fakeExec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &fakeExec{calls: slices.Clone(f.calls), by: map[string]behaviour{}, next: f.next}
}

// setAll replaces every delegate's behaviour.
func setAll(f *fakeExec, by map[string]behaviour) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.by = maps.Clone(by)
	if f.by == nil {
		f.by = map[string]behaviour{}
	}
}

// switchedExec forwards to the world until it is switched off: then the
// process that owned it is dead and can touch nothing.
type switchedExec struct {
	world *fakeExec
	off   atomic.Bool
}

var errProcessDead = errors.New("the process is dead")

func (s *switchedExec) Add(ctx context.Context, c Call) (types.Result, error) {
	if s.off.Load() {
		return nil, errProcessDead
	}
	return s.world.Add(ctx, c)
}

func (s *switchedExec) Run(ctx context.Context, c Call) error {
	if s.off.Load() {
		return errProcessDead
	}
	return s.world.Run(ctx, c)
}

// assertExplained asserts that everything the world holds for r is
// explained by r's record (see explain). It returns the record, or nil.
func assertExplained(t *testing.T, store cache.Store, world *fakeExec, r Request, corruptOK bool, msg string) *cache.Record {
	t.Helper()
	rec, err := explain(store, world, r, corruptOK)
	require.NoError(t, err, msg)
	return rec
}

// explain checks that the record loads (a crash or a fault never leaves
// one that does not verify, unless corruptOK: the test made it corrupt, and
// DEL then tears every delegate down) and that every delegate holding
// something for r has a held step. (The converse need not hold: a DEL records nothing
// until it ends, so its record still says "added" for what it already tore
// down, and the next DEL repeats those idempotent DELs.)
func explain(store cache.Store, world *fakeExec, r Request, corruptOK bool) (*cache.Record, error) {
	held := heldBy(world, r.Args.ContainerID)
	rec, err := store.Load(r.Key())
	if corruptOK && errors.Is(err, cache.ErrCorrupt) {
		return nil, nil
	}
	if errors.Is(err, cache.ErrNotFound) {
		if len(held) > 0 {
			return nil, fmt.Errorf("no record, yet %v hold", slices.Sorted(maps.Keys(held)))
		}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the record must load: %w", err)
	}
	for typ := range held {
		i := slices.IndexFunc(rec.Steps, func(s cache.Step) bool { return s.Type == typ })
		if i < 0 || !rec.Steps[i].Held() {
			return rec, fmt.Errorf("%s holds, but the record (phase %s) says %v", typ, rec.Phase, states(rec))
		}
	}
	return rec, nil
}

// assertClean asserts that teardown ended clean: nothing held, no record,
// nothing quarantined (unless quarantined, when the test made the record
// corrupt). Two leftovers are tolerated, as long as the next
// ADD and DEL of the attachment clear them (this checks it): a temp file
// of a first record write that a crash interrupted (no record came of it,
// so DEL never looks), and a teardown-index note whose record is gone (the
// index is a hint).
func assertClean(t *testing.T, fsys afero.Fs, eng *Engine, world *fakeExec, r Request, quarantined bool, msg string) {
	t.Helper()
	assert.Empty(t, heldBy(world, r.Args.ContainerID), "%s: still held", msg)
	_, err := eng.Store.Load(r.Key())
	require.ErrorIs(t, err, cache.ErrNotFound, "%s: record left", msg)
	if !quarantined {
		assert.Empty(t, dirNames(t, fsys, filepath.Join(testCacheDir, "quarantine")), "%s: quarantined", msg)
	}
	records := filepath.Join(testCacheDir, "records", r.Conf.Name)
	pending := filepath.Join(testCacheDir, "pending", r.Conf.Name)
	temps := dirNames(t, fsys, records)
	for _, name := range temps {
		require.True(t, strings.HasPrefix(name, "."+r.Args.ContainerID+":") && strings.HasSuffix(name, ".tmp"),
			"%s: %s left in %s", msg, name, records)
	}
	if len(temps)+len(dirNames(t, fsys, pending)) == 0 {
		return
	}
	_, err = eng.Add(context.Background(), r)
	require.NoError(t, err, msg)
	require.NoError(t, eng.Del(context.Background(), r), msg)
	assert.Empty(t, heldBy(world, r.Args.ContainerID), "%s: still held", msg)
	assert.Empty(t, dirNames(t, fsys, records), "%s: a leftover outlives the next ADD and DEL", msg)
	assert.Empty(t, dirNames(t, fsys, pending), "%s: a leftover outlives the next ADD and DEL", msg)
}

// dirNames lists a directory (nil if it does not exist).
func dirNames(t *testing.T, fsys afero.Fs, dir string) []string {
	t.Helper()
	infos, err := afero.ReadDir(fsys, dir)
	if errors.Is(err, afero.ErrFileNotFound) {
		return nil
	}
	require.NoError(t, err)
	var names []string
	for _, fi := range infos {
		names = append(names, fi.Name())
	}
	return names
}
