package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
)

func TestRepair(t *testing.T) {
	f := newFixture(t, "okplug", "badplug")
	types := []string{"okplug", "badplug"}
	f.save("c-ok", "eth0", cache.PhaseNeedsTeardown, time.Hour, []string{"okplug"}, cache.StepDelFailed)
	f.save("c-bad", "eth0", cache.PhaseNeedsTeardown, time.Hour, types, cache.StepAdded, cache.StepDelFailed)
	f.save("c-live", "eth0", cache.PhaseComplete, time.Hour, types, cache.StepAdded, cache.StepAdded)

	out, stderr, code := f.run("repair")
	assert.Equal(t, 1, code, "a teardown failed again")
	assert.Contains(t, stderr, `repair of network "podnet": 1 record(s) still need teardown`)
	rows := tableRows(out)
	assert.Equal(t, []string{"RESULT", "CONTAINER", "IFNAME", "DETAIL"}, rows[0])
	assert.True(t, hasRow(rows, "repaired", "c-ok", "eth0", "-"), out)
	assert.True(t, hasRow(rows, "failed", "c-bad", "eth0"), out)
	assert.Contains(t, out, "badplug fails on purpose")
	assert.Contains(t, out, `repair of network "podnet": 1 repaired, 1 failed, 0 skipped`)
	assert.False(t, f.recordExists("c-ok", "eth0"))
	assert.True(t, f.recordExists("c-live", "eth0"), "a complete record is never touched")
	rec, err := f.store.Load(cache.Key{Network: testNet, ContainerID: "c-bad", IfName: "eth0"})
	require.NoError(t, err)
	assert.Equal(t, cache.PhaseNeedsTeardown, rec.Phase)
	assert.Equal(t, 2, rec.TeardownAttempts, "the attempt is counted")
	assert.Equal(t, cache.StepDelFailed, rec.Steps[1].State)
	assert.Equal(t, cache.StepAdded, rec.Steps[0].State, "strict reverse order: stopped before delegate 0")
	assert.ElementsMatch(t, []string{"DEL c-ok", "DEL c-bad"}, f.calls())

	out, stderr, code = f.run("repair", "--json")
	assert.Equal(t, 1, code)
	rep := decodeJSON[map[string]any](t, out)
	assert.Equal(t, testNet, rep["network"])
	assert.Empty(t, rep["repaired"])
	assert.Empty(t, rep["skipped"])
	require.Len(t, rep["failed"], 1)
	failed := rep["failed"].([]any)[0].(map[string]any)
	assert.Equal(t, map[string]any{"network": testNet, "containerID": "c-bad", "ifName": "eth0"}, failed["key"])
	assert.Contains(t, failed["error"], "delegate 1 (badplug) DEL failed")
	assert.NotContains(t, rep, "abandoned")
	assert.Contains(t, stderr, "still need teardown")
}

func TestRepairAbandon(t *testing.T) {
	t.Run("teardown continues past the abandoned step", func(t *testing.T) {
		f := newFixture(t, "okplug", "badplug")
		f.save("c-bad", "eth0", cache.PhaseNeedsTeardown, time.Hour, []string{"okplug", "badplug"}, cache.StepAdded, cache.StepDelFailed)
		out, stderr, code := f.run("repair", "--abandon", "c-bad", "--delegate", "1")
		require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, stderr)
		assert.Contains(t, out, "abandoned delegate 1 of podnet/c-bad/eth0 at "+timestamp(f.now))
		assert.True(t, hasRow(tableRows(out), "repaired", "c-bad", "eth0"), out)
		assert.False(t, f.recordExists("c-bad", "eth0"))
		assert.Equal(t, []string{"DEL c-bad"}, f.calls(), "only delegate 0's DEL ran")
	})
	t.Run("the record keeps what was abandoned, and when", func(t *testing.T) {
		f := newFixture(t, "badplug", "badplug")
		f.save("c-bad", "eth0", cache.PhaseNeedsTeardown, time.Hour, []string{"badplug"}, cache.StepAdded, cache.StepDelFailed)
		out, stderr, code := f.run("repair", "--abandon", "c-bad", "--delegate", "1", "--ifname", "eth0", "--json")
		assert.Equal(t, 1, code, "delegate 0's DEL still fails")
		assert.Contains(t, stderr, "still need teardown")
		rep := decodeJSON[map[string]any](t, out)
		assert.Equal(t, map[string]any{
			"key":         map[string]any{"network": testNet, "containerID": "c-bad", "ifName": "eth0"},
			"delegate":    float64(1),
			"abandonedAt": f.now.UTC().Format(time.RFC3339Nano),
		}, rep["abandoned"])
		rec, err := f.store.Load(cache.Key{Network: testNet, ContainerID: "c-bad", IfName: "eth0"})
		require.NoError(t, err)
		assert.Equal(t, cache.StepAbandoned, rec.Steps[1].State)
		assert.True(t, f.now.Equal(rec.Steps[1].AbandonedAt), "abandonedAt %s", rec.Steps[1].AbandonedAt)
		assert.Equal(t, "badplug fails on purpose", rec.Steps[1].DelError, "its last DEL error is kept")
		assert.Equal(t, cache.StepDelFailed, rec.Steps[0].State)

		out, _, code = f.run("show", "c-bad")
		require.Equal(t, 0, code)
		assert.True(t, hasRow(tableRows(out), "1", "badplug", "1.1.0", "abandoned", "3ms", "1", timestamp(f.now)), out)
	})
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"delegate without abandon", []string{"repair", "--delegate", "1"}, 2, "--delegate and --ifname go with --abandon"},
		{"abandon without delegate", []string{"repair", "--abandon", "c-two"}, 2, "--abandon needs --delegate INDEX"},
		{"several ifnames", []string{"repair", "--abandon", "c-two", "--delegate", "0"}, 2, `container "c-two" has 2 attachments on network "podnet": pass --ifname (one of: eth0, net1)`},
		{"no such container", []string{"repair", "--abandon", "nosuch", "--delegate", "0"}, 1, `no record of container "nosuch" on network "podnet"`},
		{"no such delegate", []string{"repair", "--abandon", "c-two", "--delegate", "5", "--ifname", "eth0"}, 1, "no delegate 5"},
		{"complete record", []string{"repair", "--abandon", "c-live", "--delegate", "0"}, 1, "complete and live"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "badplug")
			bad := []string{"badplug"}
			f.save("c-two", "eth0", cache.PhaseNeedsTeardown, time.Hour, bad, cache.StepDelFailed)
			f.save("c-two", "net1", cache.PhaseNeedsTeardown, time.Hour, bad, cache.StepDelFailed)
			f.save("c-live", "eth0", cache.PhaseComplete, time.Hour, bad, cache.StepAdded)
			out, stderr, code := f.run(tt.args...)
			assert.Equal(t, tt.wantCode, code, "stdout: %s", out)
			assert.Contains(t, stderr, tt.wantErr)
			assert.Empty(t, f.calls(), "no plugin called")
			for _, k := range []cache.Key{{Network: testNet, ContainerID: "c-two", IfName: "eth0"}, {Network: testNet, ContainerID: "c-live", IfName: "eth0"}} {
				rec, err := f.store.Load(k)
				require.NoError(t, err)
				assert.NotEqual(t, cache.StepAbandoned, rec.Steps[0].State)
			}
		})
	}
}

// TestCannotListRecords: when the records cannot be listed, repair and gc
// fail naming the path and the error, and never say that nothing needs
// teardown or that nothing was torn down.
func TestCannotListRecords(t *testing.T) {
	file := func(t *testing.T, p string) { require.NoError(t, os.WriteFile(p, []byte("x"), 0o600)) }
	symlink := func(t *testing.T, p string) { require.NoError(t, os.Symlink(t.TempDir(), p)) }
	tests := []struct {
		name    string
		at      string // under the cache dir
		plant   func(t *testing.T, path string)
		wantErr string
	}{
		{"records is a file", "records", file, "not a directory"},
		{"the network's dir is a file", "records/" + testNet, file, "not a directory"},
		{"the network's dir is a symlink", "records/" + testNet, symlink, "is a symlink"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, args := range [][]string{{"repair"}, {"repair", "--json"}, {"gc", "--stale-netns"}, {"gc", "--stale-netns", "--json"}} {
				f := newFixture(t, "okplug")
				path := filepath.Join(f.cacheDir, tt.at)
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
				tt.plant(t, path)
				out, stderr, code := f.run(args...)
				assert.Equal(t, 1, code, "%v: stdout: %s", args, out)
				assert.NotContains(t, out, "nothing needs teardown", args)
				assert.NotContains(t, out, "0 repaired", args)
				assert.NotContains(t, out, "0 torn down", args)
				assert.Contains(t, stderr, path, args)
				assert.Contains(t, stderr, tt.wantErr, args)
				assert.Empty(t, f.calls(), "no plugin called")
			}
		})
	}
}
