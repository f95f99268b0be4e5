package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
)

// populate saves a complete record (2h old), one that needs teardown (3d
// old) and a corrupt one, and returns the corrupt one's path.
func populate(f *fixture) string {
	f.t.Helper()
	f.save("c-live", "eth0", cache.PhaseComplete, 2*time.Hour, []string{"okplug", "badplug"}, cache.StepAdded, cache.StepAdded)
	f.save("c-stuck", "eth0", cache.PhaseNeedsTeardown, 72*time.Hour, []string{"okplug", "badplug"}, cache.StepAdded, cache.StepDelFailed)
	corrupt := filepath.Join(f.cacheDir, "records", testNet, "c-bad:eth0.json")
	require.NoError(f.t, os.WriteFile(corrupt, []byte("not a journal\n"), 0o600))
	return corrupt
}

func TestListTable(t *testing.T) {
	f := newFixture(t)
	populate(f)
	out, stderr, code := f.run("list")
	require.Equal(t, 0, code, stderr)
	assert.Empty(t, stderr)
	rows := tableRows(out)
	require.Len(t, rows, 4, out)
	assert.Equal(t, []string{"NETWORK", "CONTAINER", "IFNAME", "PHASE", "AGE", "ATTEMPTS", "NEXT", "DELEGATES"}, rows[0])
	assert.Equal(t, []string{testNet, "c-bad", "eth0", "unreadable", "-", "-"}, rows[1][:6], "sorted by container; the corrupt record is listed")
	assert.Contains(t, out, "corrupt record")
	assert.Equal(t, []string{testNet, "c-live", "eth0", "complete", "2h", "0", "-", "okplug:added", "badplug:added"}, rows[2])
	assert.Equal(t, []string{testNet, "c-stuck", "eth0", "needs-teardown", "3d", "1", "-", "okplug:added", "badplug:del-failed"}, rows[3])

	// A pending note says when the teardown is next retried.
	s := cache.NewDiskStore(afero.NewOsFs(), f.cacheDir, cache.NewFlockLocker(filepath.Join(f.cacheDir, cache.LocksDir)))
	require.NoError(t, s.NotePending(cache.Key{Network: testNet, ContainerID: "c-stuck", IfName: "eth0"},
		cache.PendingNote{Due: time.Now().Add(150 * time.Second), Attempts: 1}))
	out, _, code = f.run("list")
	require.Equal(t, 0, code)
	assert.Equal(t, "2m", tableRows(out)[3][6], out)
	out, _, code = f.run("--json", "list", "--network", testNet)
	require.Equal(t, 0, code)
	assert.Contains(t, out, `"nextAttempt"`)

	out, _, code = f.run("list", "--network", "othernet")
	require.Equal(t, 0, code)
	assert.Len(t, tableRows(out), 1, "only the header: %s", out)
}

func TestListJSON(t *testing.T) {
	f := newFixture(t)
	populate(f)
	out, stderr, code := f.run("--json", "list")
	require.Equal(t, 0, code, stderr)
	rows := decodeJSON[[]map[string]any](t, out)
	require.Len(t, rows, 3)
	bad, live, stuck := rows[0], rows[1], rows[2]
	assert.Equal(t, "unreadable", bad["phase"])
	assert.Contains(t, bad["error"], "corrupt record")
	assert.Equal(t, map[string]any{
		"network": testNet, "containerID": "c-live", "ifName": "eth0", "phase": "complete",
		"created": f.now.Add(-2 * time.Hour).UTC().Format(time.RFC3339Nano), "ageSeconds": float64(7200),
		"teardownAttempts": float64(0),
		"delegates": []any{
			map[string]any{"index": float64(0), "type": "okplug", "state": "added"},
			map[string]any{"index": float64(1), "type": "badplug", "state": "added"},
		},
	}, live)
	assert.Equal(t, "needs-teardown", stuck["phase"])
	assert.Equal(t, "earlier DEL failed", stuck["lastError"])
	assert.Equal(t, float64(1), stuck["teardownAttempts"])
}

func TestListEmptyCacheDir(t *testing.T) {
	f := newFixture(t)
	out, _, code := f.run("--json", "list")
	require.Equal(t, 0, code)
	assert.JSONEq(t, `[]`, out)
	_, err := os.Stat(f.cacheDir)
	assert.True(t, os.IsNotExist(err), "list creates nothing")
}

func TestShow(t *testing.T) {
	f := newFixture(t)
	populate(f)
	f.save("c-stuck", "net1", cache.PhaseComplete, time.Hour, []string{"okplug"}, cache.StepAdded)

	t.Run("table", func(t *testing.T) {
		out, stderr, code := f.run("show", "c-stuck", "--ifname", "eth0")
		require.Equal(t, 0, code, stderr)
		rows := tableRows(out)
		assert.Equal(t, []string{"attachment", testNet + "/c-stuck/eth0"}, rows[0])
		assert.Contains(t, rows, []string{"record", filepath.Join(f.cacheDir, "records", testNet, "c-stuck:eth0.json")})
		assert.Contains(t, rows, []string{"phase", "needs-teardown"})
		assert.Contains(t, rows, []string{"netns", "/var/run/netns/c-stuck"})
		assert.Contains(t, rows, []string{"teardown", "attempts", "1"})
		assert.Contains(t, rows, []string{"INDEX", "TYPE", "VERSION", "STATE", "ADD-TIME", "DELS", "ABANDONED", "ERROR"})
		assert.Contains(t, rows, []string{"0", "okplug", "1.1.0", "added", "3ms", "0", "-", "-"})
		assert.Contains(t, rows, []string{"1", "badplug", "1.1.0", "del-failed", "3ms", "1", "-", "DEL:", "badplug", "fails", "on", "purpose"})
		assert.Contains(t, out, `delegate 1 (badplug) config: {"cniVersion":"1.1.0","name":"podnet","type":"badplug"}`)
		assert.NotContains(t, out, "c-stuck/net1")
	})
	t.Run("json, every ifname", func(t *testing.T) {
		out, stderr, code := f.run("show", "c-stuck", "--json")
		require.Equal(t, 0, code, stderr)
		recs := decodeJSON[[]cache.Record](t, out)
		require.Len(t, recs, 2)
		for _, r := range recs {
			stored, err := f.store.Load(r.Key)
			require.NoError(t, err)
			want, err := json.Marshal(stored)
			require.NoError(t, err)
			got, err := json.Marshal(r)
			require.NoError(t, err)
			assert.JSONEq(t, string(want), string(got), "the record exactly as stored")
		}
		assert.Equal(t, "eth0", recs[0].Key.IfName)
		assert.Equal(t, "net1", recs[1].Key.IfName)
	})
	t.Run("no record", func(t *testing.T) {
		out, stderr, code := f.run("show", "nosuch")
		assert.Equal(t, 1, code)
		assert.Empty(t, out)
		assert.Contains(t, stderr, `no record of container "nosuch" in `+f.cacheDir)
	})
	t.Run("unreadable record", func(t *testing.T) {
		_, stderr, code := f.run("show", "c-bad")
		assert.Equal(t, 1, code)
		assert.Contains(t, stderr, "record of podnet/c-bad/eth0")
		assert.Contains(t, stderr, "corrupt record")
	})
	t.Run("missing argument", func(t *testing.T) {
		_, stderr, code := f.run("show")
		assert.Equal(t, 2, code)
		assert.Contains(t, stderr, "accepts 1 arg(s)")
	})
}
