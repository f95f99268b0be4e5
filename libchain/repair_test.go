package libchain

import (
	"context"
	"testing"

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
