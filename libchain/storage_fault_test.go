package libchain

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/cache/faultfs"
)

// Storage-fault tests: the scenarios of the power-loss test run on a
// DiskStore whose filesystem fails the n-th create, write, sync, directory
// sync, rename, remove or mkdir with ENOSPC, EIO or EROFS, once or from then
// on, for every n the operation reaches. Whatever happens, nothing is held
// that no record explains; a failed ADD is a clear CNI error; a failed DEL
// keeps what a later DEL finishes.

var faultErrnos = []syscall.Errno{syscall.ENOSPC, syscall.EIO, syscall.EROFS}

// faultTally counts outcomes.
type faultTally struct {
	cases, injected                    int
	ok, rolledBack, incomplete, failed int
}

func (f faultTally) String() string {
	return fmt.Sprintf("%d cases (%d faulty operations): %d succeeded, %d failed and rolled back, %d failed keeping a record, %d other failures",
		f.cases, f.injected, f.ok, f.rolledBack, f.incomplete, f.failed)
}

func TestStorageFaults(t *testing.T) {
	var all faultTally
	for _, sc := range crashScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			var tally faultTally
			counts := runWithFault(t, sc, nil, &faultTally{})
			for _, op := range faultfs.Ops {
				for n := 1; n <= counts[op]; n++ {
					for _, errno := range faultErrnos {
						for _, sticky := range []bool{false, true} {
							runWithFault(t, sc, &faultfs.Fault{Op: op, N: n, Err: errno, Sticky: sticky}, &tally)
						}
					}
				}
			}
			require.Positive(t, tally.injected)
			t.Logf("%s: operations %v; %s", sc.name, counts, tally)
			all.cases += tally.cases
			all.injected += tally.injected
			all.ok += tally.ok
			all.rolledBack += tally.rolledBack
			all.incomplete += tally.incomplete
			all.failed += tally.failed
		})
	}
	t.Logf("storage faults, all scenarios: %s; no leak", all)
}

// runWithFault runs sc with ft injected during its operation (none if ft
// is nil), checks the outcome, heals the disk and DELs until clean. It
// returns how many operations of each kind sc's operation made.
func runWithFault(t *testing.T, sc crashScenario, ft *faultfs.Fault, tally *faultTally) map[faultfs.Op]int {
	t.Helper()
	fsys := faultfs.New(afero.NewMemMapFs())
	world := newFakeExec()
	eng := &Engine{Store: cache.NewDiskStore(fsys, testCacheDir, cache.NewMemLocker()), Exec: world}
	r := req(matrixConf(t), "c1")
	if sc.prepare != nil {
		sc.prepare(t, fsys, world, eng, r)
	}
	setAll(world, sc.failing)
	fsys.ResetCounts()
	msg := sc.name + " without fault"
	if ft != nil {
		fsys.Inject(*ft)
		msg = fmt.Sprintf("%s with %s", sc.name, ft)
	}
	err := sc.op(eng, r)
	counts := map[faultfs.Op]int{}
	for _, op := range faultfs.Ops {
		counts[op] = fsys.Count(op)
	}
	tally.cases++
	tally.injected += fsys.Injected()
	if sc.verb == "ADD" {
		checkAddOutcome(t, eng, world, r, err, sc.failing == nil && sc.prepare == nil, ft, msg, tally)
	} else {
		checkDelOutcome(t, eng, world, r, err, sc.quarantines, msg, tally)
	}

	// The disk is healthy again, and the delegates: DEL finishes.
	fsys.Heal()
	setAll(world, nil)
	require.NoError(t, eng.Del(t.Context(), r), msg)
	require.NoError(t, eng.Del(t.Context(), r), msg)
	assertClean(t, fsys, eng, world, r, sc.quarantines, msg)
	return counts
}

// checkAddOutcome: ADD succeeded with everything held and recorded
// complete, or failed with a CNI error that names the attachment (and,
// if only the disk failed, the disk's error, with code 5), having rolled
// back or recorded what it still holds.
func checkAddOutcome(t *testing.T, eng *Engine, world *fakeExec, r Request, err error, onlyDisk bool, ft *faultfs.Fault, msg string, tally *faultTally) {
	t.Helper()
	rec := assertExplained(t, eng.Store, world, r, false, msg)
	if err == nil {
		tally.ok++
		require.NotNil(t, rec, msg)
		assert.Equal(t, cache.PhaseComplete, rec.Phase, msg)
		assert.Len(t, heldBy(world, r.Args.ContainerID), 3, msg)
		return
	}
	var te *types.Error
	require.True(t, errors.As(err, &te), "%s: not a CNI error: %v", msg, err)
	assert.NotZero(t, te.Code, msg)
	require.True(t, strings.HasPrefix(te.Msg, "catena: ADD "+r.Key().String()+": "), "%s: %s", msg, te.Msg)
	if onlyDisk {
		require.NotNil(t, ft, "%s: %v", msg, err)
		assert.Equal(t, uint(types.ErrIOFailure), te.Code, "%s: %v", msg, err)
		assert.Contains(t, te.Msg, ft.Err.Error(), msg)
	}
	switch {
	case strings.HasSuffix(te.Msg, "; rolled back"):
		tally.rolledBack++
		assert.Nil(t, rec, "%s: rolled back, yet recorded", msg)
		assert.Empty(t, heldBy(world, r.Args.ContainerID), "%s: rolled back, yet held", msg)
	case strings.Contains(te.Msg, "still held and recorded for the next DEL"),
		strings.Contains(te.Msg, "could not be torn down"):
		tally.incomplete++
	default:
		tally.failed++
		t.Errorf("%s: unexpected ADD error %v", msg, err)
	}
}

// checkDelOutcome: DEL succeeded and nothing is held or recorded (but a
// corrupt record), or it failed with code 11 naming the attachment, and
// what is held is recorded.
func checkDelOutcome(t *testing.T, eng *Engine, world *fakeExec, r Request, err error, corrupt bool, msg string, tally *faultTally) {
	t.Helper()
	rec := assertExplained(t, eng.Store, world, r, corrupt, msg)
	if err == nil {
		tally.ok++
		// A corrupt record that could not be moved aside stays in place
		// (DEL does not wedge on a read-only disk): it holds nothing, as
		// DEL tore every delegate down.
		assert.Nil(t, rec, "%s: DEL succeeded, yet recorded", msg)
		assert.Empty(t, heldBy(world, r.Args.ContainerID), "%s: DEL succeeded, yet held", msg)
		return
	}
	tally.incomplete++
	assert.Equal(t, uint(types.ErrTryAgainLater), cniCode(t, err), "%s: %v", msg, err)
	assert.Contains(t, err.Error(), "catena: DEL "+r.Key().String()+": ", msg)
}

// TestDurableWritesPerAdd counts, on the real DiskStore on the real disk,
// what an ADD and a DEL of a three-delegate chain cost: n+1 = 4 durable
// writes (file syncs) for the ADD, the first creating the record
// preallocated (one rename and one directory sync), the others writing in
// place over its zeros, and an unlink of its pending note in case an
// earlier teardown left one (an unlink that finds nothing); none for the DEL,
// whose removal costs one directory sync and also unlinks the record's temp
// file in case a crash left one (an unlink that finds nothing).
func TestDurableWritesPerAdd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "catena")
	fsys := faultfs.New(afero.NewOsFs())
	world := newFakeExec()
	eng := &Engine{Store: cache.NewDiskStore(fsys, dir, cache.NewFlockLocker(filepath.Join(dir, "locks"))), Exec: world}
	conf := matrixConf(t)
	conf.CacheDir = dir
	// The first ADD on a fresh cache dir also creates its directories.
	_, err := eng.Add(t.Context(), req(conf, "c0"))
	require.NoError(t, err)

	fsys.ResetCounts()
	_, err = eng.Add(t.Context(), req(conf, "c1"))
	require.NoError(t, err)
	add := map[faultfs.Op]int{}
	for _, op := range faultfs.Ops {
		add[op] = fsys.Count(op)
	}
	assert.Equal(t, map[faultfs.Op]int{faultfs.OpCreate: 1, faultfs.OpWrite: 4, faultfs.OpSync: 4, faultfs.OpSyncDir: 1, faultfs.OpRename: 1, faultfs.OpRemove: 1}, prune(add))

	fsys.ResetCounts()
	require.NoError(t, eng.Del(t.Context(), req(conf, "c1")))
	del := map[faultfs.Op]int{}
	for _, op := range faultfs.Ops {
		del[op] = fsys.Count(op)
	}
	assert.Equal(t, map[faultfs.Op]int{faultfs.OpSyncDir: 1, faultfs.OpRemove: 2}, prune(del))
	t.Logf("3-delegate ADD: %d durable writes (file syncs), %d directory syncs; DEL: %d file syncs, %d directory syncs",
		add[faultfs.OpSync], add[faultfs.OpSyncDir], del[faultfs.OpSync], del[faultfs.OpSyncDir])
}

// prune drops the zero counts.
func prune(m map[faultfs.Op]int) map[faultfs.Op]int {
	for k, v := range m {
		if v == 0 {
			delete(m, k)
		}
	}
	return m
}
