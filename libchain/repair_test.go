package libchain

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
)

// failedRollback leaves c1 needing teardown: portmap's ADD fails and the
// rollback DEL of ipam fails.
func failedRollback(t *testing.T, eng *Engine, exec *fakeExec, conf *NetConf) {
	t.Helper()
	exec.set("portmap", behaviour{failAdd: true})
	exec.set("ipam", behaviour{failDel: true})
	_, err := eng.Add(context.Background(), req(conf, "c1"))
	require.Error(t, err)
	exec.set("portmap", behaviour{})
	exec.reset()
}

func TestRepair(t *testing.T) {
	h := newHarness()
	conf := chainConf(t, "1.0.0", dIPAM, dPort)
	failedRollback(t, h.eng, h.exec, conf)
	_, err := h.eng.Add(context.Background(), req(conf, "live"))
	require.NoError(t, err)
	h.exec.reset()

	rep, err := h.eng.Repair(context.Background(), gcReq(conf), nil)
	require.Error(t, err, "ipam's DEL still fails")
	assert.Equal(t, types.ErrTryAgainLater, cniCode(t, err))
	require.Len(t, rep.Failed, 1)
	assert.Equal(t, "c1", rep.Failed[0].Key.ContainerID)
	rec := h.record(t, req(conf, "c1"))
	assert.Equal(t, 2, rec.TeardownAttempts)
	assert.Contains(t, rec.LastError, "delegate 0 (ipam) DEL failed")

	h.exec.set("ipam", behaviour{})
	h.exec.reset()
	rep, err = h.eng.Repair(context.Background(), gcReq(conf), nil)
	require.NoError(t, err)
	assert.Equal(t, []cache.Key{keyOf(conf, "c1")}, rep.Repaired)
	assert.Empty(t, rep.Skipped, "a complete record is not reported when repairing all")
	assert.Equal(t, []string{"DEL ipam"}, h.exec.seen(), "the live attachment is not touched")
	h.noRecord(t, req(conf, "c1"))
	h.record(t, req(conf, "live"))
}

func TestAbandon(t *testing.T) {
	h := newHarness()
	c := newClock()
	h.eng.Now = c.now
	conf := chainConf(t, "1.0.0", dIPAM, dPort)
	failedRollback(t, h.eng, h.exec, conf)
	key := keyOf(conf, "c1")

	tests := []struct {
		name  string
		key   cache.Key
		index int
		want  string
	}{
		{name: "no such delegate", key: key, index: 5, want: "no delegate 5"},
		{name: "a step that holds nothing", key: key, index: 1, want: "holds nothing"},
		{name: "no record", key: keyOf(conf, "nope"), index: 0, want: "no record"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := h.eng.Abandon(context.Background(), tc.key, tc.index, c.now())
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	require.NoError(t, h.eng.Abandon(context.Background(), key, 0, c.now()))
	rec := h.record(t, req(conf, "c1"))
	assert.Equal(t, cache.StepAbandoned, rec.Steps[0].State)
	assert.Equal(t, c.now(), rec.Steps[0].AbandonedAt)
	assert.Contains(t, rec.Steps[0].DelError, "failed on purpose", "the last DEL error is kept")

	rep, err := h.eng.Repair(context.Background(), gcReq(conf), []cache.Key{key})
	require.NoError(t, err)
	assert.Equal(t, []cache.Key{key}, rep.Repaired)
	assert.Empty(t, h.exec.seen(), "an abandoned step is not DELed again")
	h.noRecord(t, req(conf, "c1"))

	_, err = h.eng.Add(context.Background(), req(conf, "live"))
	require.NoError(t, err)
	err = h.eng.Abandon(context.Background(), keyOf(conf, "live"), 0, c.now())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "complete and live")
}

func TestStatusReportsCatenaOwnProblems(t *testing.T) {
	fs := afero.NewMemMapFs()
	exec := newFakeExec()
	conf := chainConf(t, "1.1.0", dIPAM)
	store := cache.NewDiskStore(afero.NewReadOnlyFs(fs), "/var/lib/cni/catena", cache.NewMemLocker())
	eng := &Engine{Store: store, Exec: exec}
	err := eng.Status(context.Background(), gcReq(conf))
	require.Error(t, err)
	assert.Equal(t, types.ErrPluginNotAvailable, cniCode(t, err))
	assert.Contains(t, err.Error(), "catena cannot record attachments")
	assert.Empty(t, exec.seen())

	eng.Store = cache.NewDiskStore(fs, "/var/lib/cni/catena", cache.NewMemLocker())
	require.NoError(t, eng.Status(context.Background(), gcReq(conf)))
	assert.Equal(t, []string{"STATUS ipam"}, exec.seen())
}

func TestEventJournal(t *testing.T) {
	dir := t.TempDir()
	j := &EventJournal{CacheDir: dir}
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	for i := range 3 {
		require.NoError(t, j.Append(Op{Verb: "ADD", Attachment: "n/c/eth0", Start: t0.Add(time.Duration(i) * time.Minute), Outcome: "ok",
			Calls: []OpCall{{Index: 0, Type: "bridge", Verb: "ADD", Duration: time.Millisecond}}}))
	}
	ops, skipped, err := ReadEvents(afero.NewOsFs(), dir, t0.Add(time.Minute))
	require.NoError(t, err)
	assert.Zero(t, skipped)
	require.Len(t, ops, 2)
	assert.Equal(t, "bridge", ops[0].Calls[0].Type)
	assert.Equal(t, time.Millisecond, ops[0].Calls[0].Duration)
	fi, err := afero.NewOsFs().Stat(EventsPath(dir))
	require.NoError(t, err)
	assert.Equal(t, "-rw-------", fi.Mode().Perm().String())
}

func TestEventJournalRotates(t *testing.T) {
	dir := t.TempDir()
	j := &EventJournal{CacheDir: dir}
	big := strings.Repeat("x", 60<<10) // a line short of MaxEventLine
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	for i := range 80 {
		require.NoError(t, j.Append(Op{Verb: "DEL", Start: t0.Add(time.Duration(i) * time.Second), Error: big}))
	}
	main, err := os.Stat(EventsPath(dir))
	require.NoError(t, err)
	rotated, err := os.Stat(EventsPath(dir) + ".1")
	require.NoError(t, err)
	assert.Less(t, main.Size(), int64(eventsMaxSize))
	assert.GreaterOrEqual(t, rotated.Size(), int64(eventsMaxSize))
	ops, skipped, err := ReadEvents(afero.NewOsFs(), dir, time.Time{})
	require.NoError(t, err)
	assert.Zero(t, skipped, "60 KiB lines are read")
	require.Len(t, ops, 80, "rotation loses nothing")
	assert.Equal(t, big, ops[79].Error, "nor cuts anything")
	assert.Equal(t, t0, ops[0].Start, "the rotated file is read first")
}
