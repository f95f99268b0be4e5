package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHungTeardownCostsOneADDPerBackoffPeriod is issue 12 item 5: one
// record whose DEL hangs until delegateTimeout, and a newer one whose DEL
// failed but now works, on the same network. The ADDs that follow must not
// each wait delegateTimeout for the hung DEL, and the fixable record must get
// its turn.
func TestHungTeardownCostsOneADDPerBackoffPeriod(t *testing.T) {
	w := newWorld(t)
	const (
		net     = "itbackoff"
		timeout = 2 * time.Second // delegateTimeout
		adds    = 5
	)
	tmp := t.TempDir()
	hang, fail := filepath.Join(tmp, "hang"), filepath.Join(tmp, "fail")
	for _, f := range []string{hang, fail} {
		require.NoError(t, os.WriteFile(f, nil, 0o600))
	}
	// Records keep the config of their ADD: one network, three chains.
	hanging := w.timedList(net, "10s", timeout.String(), w.bridgeDelegate(),
		failer(fmt.Sprintf(`"hangDel":"60s","faultFile":%q`, hang)))
	failing := w.timedList(net, "10s", timeout.String(), w.bridgeDelegate(),
		failer(fmt.Sprintf(`"failDel":true,"faultFile":%q`, fail)))
	healthy := w.timedList(net, "10s", timeout.String(), w.bridgeDelegate())

	hung, fixable := w.container("hung"), w.container("fixable")
	lists := map[*libcni.RuntimeConf]*libcni.NetworkConfigList{hung: hanging, fixable: failing}
	for _, rt := range []*libcni.RuntimeConf{hung, fixable} {
		_, err := w.cni.AddNetworkList(bg, lists[rt], rt)
		require.NoError(t, err)
		// Runs after the hang is lifted: the hung record is then torn down.
		w.t.Cleanup(func() { assert.NoError(t, w.cni.DelNetworkList(bg, lists[rt], rt)) })
	}
	for _, rt := range []*libcni.RuntimeConf{hung, fixable} {
		require.Error(t, w.cni.DelNetworkList(bg, lists[rt], rt))
	}
	w.t.Cleanup(func() { _ = os.Remove(hang) })
	require.Len(t, w.records(net), 2)
	require.NoError(t, os.Remove(fail)) // the newer record can now be torn down

	var took []time.Duration
	slow := 0
	for i := range adds {
		rt := w.container(fmt.Sprintf("c%d", i))
		start := time.Now()
		_, err := w.cni.AddNetworkList(bg, healthy, rt)
		took = append(took, time.Since(start))
		require.NoError(t, err)
		w.delAtCleanup(healthy, rt)
		if took[i] >= timeout {
			slow++
		}
	}
	t.Logf("ADD durations with a hung pending teardown: %v", took)

	assert.LessOrEqual(t, slow, 2, "at most one ADD per backoff period waits for the hung DEL: %v", took)
	recs := w.records(net)
	var fixableLeft bool
	for _, r := range recs {
		switch filepath.Base(r) {
		case fixable.ContainerID + ":eth0.json":
			fixableLeft = true
		case hung.ContainerID + ":eth0.json":
			attempts := readRecord(t, r)["teardownAttempts"]
			assert.Contains(t, []any{2.0, 3.0}, attempts, "the hung record was retried, once or twice")
		}
	}
	assert.False(t, fixableLeft, "the newer, fixable record got its turn and was torn down")
	assert.Len(t, recs, 1+adds, "the hung record stays, with the new attachments")
}
