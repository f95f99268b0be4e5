package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain/events"
)

func TestGC(t *testing.T) {
	okplugs := []string{"okplug"}
	tests := []struct {
		name  string
		args  func(f *fixture) []string
		valid string // contents of the --valid file, if any
		// wantGone are the containers whose records GC removed; wantDels
		// the DELs the plugins saw.
		wantGone, wantKept []string
		wantDels           []string
		wantGCs            int // GCs forwarded to the plugins
		wantRows           [][]string
	}{
		{
			name:     "valid list",
			valid:    `[{"containerID":"c-live","ifname":"eth0"},{"containerID":"c-stuck","ifname":"eth0"}]`,
			wantGone: []string{"c-dead", "c-stuck"}, wantKept: []string{"c-live", "c-young"},
			wantDels: []string{"DEL c-dead", "DEL c-dead", "DEL c-stuck", "DEL c-stuck"}, wantGCs: 2,
			wantRows: [][]string{{"torn", "down", "c-dead", "eth0", "-"}, {"torn", "down", "c-stuck", "eth0", "-"}},
		},
		{
			name:     "runtime form, delegates skipped",
			args:     func(*fixture) []string { return []string{"--skip-delegates"} },
			valid:    `{"cni.dev/valid-attachments":[{"containerID":"c-live","ifname":"eth0"},{"containerID":"c-dead","ifname":"eth0"}]}`,
			wantGone: []string{"c-stuck"}, wantKept: []string{"c-live", "c-dead", "c-young"},
			wantDels: []string{"DEL c-stuck", "DEL c-stuck"},
		},
		{
			name:     "dry run",
			args:     func(*fixture) []string { return []string{"--dry-run"} },
			valid:    `[{"containerID":"c-live","ifname":"eth0"}]`,
			wantKept: []string{"c-live", "c-dead", "c-stuck", "c-young"},
			wantRows: [][]string{{"would", "tear", "down", "c-dead", "eth0", "-"}, {"would", "tear", "down", "c-stuck", "eth0", "-"}},
		},
		{
			name: "stale netns",
			args: func(f *fixture) []string {
				// c-live's netns exists; the others' are gone.
				require.NoError(t, os.WriteFile(filepath.Join(f.cacheDir, "..", "netns-live"), nil, 0o600))
				return []string{"--stale-netns"}
			},
			wantGone: []string{"c-dead", "c-stuck"}, wantKept: []string{"c-live", "c-young"},
			wantDels: []string{"DEL c-dead", "DEL c-dead", "DEL c-stuck", "DEL c-stuck"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			live := f.save("c-live", "eth0", cache.PhaseComplete, time.Hour, okplugs, cache.StepAdded, cache.StepAdded)
			live.NetNS = filepath.Join(f.cacheDir, "..", "netns-live")
			require.NoError(t, f.store.Save(live))
			f.save("c-dead", "eth0", cache.PhaseComplete, time.Hour, okplugs, cache.StepAdded, cache.StepAdded)
			f.save("c-stuck", "eth0", cache.PhaseNeedsTeardown, time.Hour, okplugs, cache.StepAdded, cache.StepDelFailed)
			f.save("c-young", "eth0", cache.PhaseComplete, -time.Hour, okplugs, cache.StepAdded, cache.StepAdded) // created "in the future": inside any grace period
			args := []string{"gc"}
			if tt.args != nil {
				args = append(args, tt.args(f)...)
			}
			if tt.valid != "" {
				p := filepath.Join(t.TempDir(), "valid.json")
				require.NoError(t, os.WriteFile(p, []byte(tt.valid), 0o600))
				args = append(args, "--valid", p)
			}
			out, stderr, code := f.run(args...)
			require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, stderr)
			for _, c := range tt.wantGone {
				assert.False(t, f.recordExists(c, "eth0"), "%s torn down", c)
			}
			for _, c := range tt.wantKept {
				assert.True(t, f.recordExists(c, "eth0"), "%s kept", c)
			}
			var dels []string
			gcs := 0
			for _, c := range f.calls() {
				switch {
				case c == "GC -":
					gcs++
				case c != "":
					dels = append(dels, c)
				}
			}
			slices.Sort(dels)
			assert.Equal(t, tt.wantDels, dels)
			assert.Equal(t, tt.wantGCs, gcs, "GCs forwarded")
			rows := tableRows(out)
			assert.Equal(t, []string{"ACTION", "CONTAINER", "IFNAME", "DETAIL"}, rows[0])
			for _, r := range tt.wantRows {
				assert.Contains(t, rows, r)
			}
			assert.True(t, hasRow(rows, "skipped", "c-young", "eth0", "younger", "than", "the", "grace", "period"), out)
		})
	}
}

func TestGCJSON(t *testing.T) {
	f := newFixture(t)
	f.save("c-dead", "eth0", cache.PhaseComplete, time.Hour, []string{"okplug"}, cache.StepAdded)
	f.save("c-held", "eth0", cache.PhaseComplete, time.Hour, []string{"badplug"}, cache.StepAdded)
	p := filepath.Join(t.TempDir(), "valid.json")
	require.NoError(t, os.WriteFile(p, []byte(`[]`), 0o600))
	out, stderr, code := f.run("gc", "--valid", p, "--json")
	assert.Equal(t, 1, code, "an error is reported by the exit code")
	assert.Contains(t, stderr, "badplug fails on purpose")
	rep := decodeJSON[map[string]any](t, out)
	assert.Equal(t, testNet, rep["network"])
	assert.Equal(t, false, rep["dryRun"])
	assert.Equal(t, []any{map[string]any{"network": testNet, "containerID": "c-dead", "ifName": "eth0"}}, rep["tornDown"])
	require.Len(t, rep["errors"], 1)
	assert.Contains(t, rep["errors"].([]any)[0], "podnet/c-held/eth0")
	assert.True(t, f.recordExists("c-held", "eth0"), "kept for a retry")
}

func TestGCBadInput(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		valid    string
		wantCode int
		wantErr  string
	}{
		{"neither mode", []string{"gc"}, "", 2, "exactly one of --valid FILE and --stale-netns"},
		{"both modes", []string{"gc", "--stale-netns"}, `[]`, 2, "exactly one of"},
		{"not JSON", []string{"gc"}, `[{`, 1, "want a list of"},
		{"null list", []string{"gc"}, `null`, 1, "the list is null"},
		{"object without the list", []string{"gc"}, `{"valid":[]}`, 1, `no "cni.dev/valid-attachments" list`},
		{"entry without ifname", []string{"gc"}, `[{"containerID":"c1"}]`, 1, "entry 0: ifname"},
		{"entry with a bad container ID", []string{"gc"}, `[{"containerID":"../x","ifname":"eth0"}]`, 1, "entry 0: container ID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.save("c1", "eth0", cache.PhaseComplete, time.Hour, []string{"okplug"}, cache.StepAdded)
			args := tt.args
			if tt.valid != "" {
				p := filepath.Join(t.TempDir(), "valid.json")
				require.NoError(t, os.WriteFile(p, []byte(tt.valid), 0o600))
				args = append(args, "--valid", p)
			}
			_, stderr, code := f.run(args...)
			assert.Equal(t, tt.wantCode, code)
			assert.Contains(t, stderr, tt.wantErr)
			assert.True(t, f.recordExists("c1", "eth0"), "nothing torn down")
			assert.Empty(t, f.calls(), "no plugin called")
		})
	}
}

// TestGCJournals: gc appends its operations to the event journal as the
// plugin's GC does: one per attachment it tore down (or failed to), which
// the agent's events read as a teardown of that attachment, and one of
// the network; a dry run appends nothing.
func TestGCJournals(t *testing.T) {
	f := newFixture(t)
	f.save("c-dead", "eth0", cache.PhaseComplete, time.Hour, []string{"okplug"}, cache.StepAdded)
	f.save("c-held", "eth0", cache.PhaseNeedsTeardown, time.Hour, []string{"badplug"}, cache.StepDelFailed)
	p := filepath.Join(t.TempDir(), "valid.json")
	require.NoError(t, os.WriteFile(p, []byte(`[]`), 0o600))
	journal := func() []string {
		ops, skipped, err := events.Read(afero.NewOsFs(), f.cacheDir, time.Time{})
		require.NoError(t, err)
		require.Zero(t, skipped.Lines)
		var out []string
		for _, op := range ops {
			out = append(out, strings.Join([]string{op.Verb, op.Attachment, op.Outcome}, " "))
		}
		return out
	}

	_, stderr, code := f.run("gc", "--valid", p, "--dry-run")
	require.Equal(t, 0, code, stderr)
	assert.Empty(t, journal(), "a dry run is no operation")

	_, stderr, code = f.run("gc", "--valid", p)
	assert.Equal(t, 1, code, stderr)
	got := journal()
	require.Len(t, got, 3, "%q", got)
	slices.Sort(got[:2]) // the teardowns come in the order of the records
	assert.Equal(t, []string{"GC podnet/c-dead/eth0 ok", "GC podnet/c-held/eth0 error", "GC  error"}, got)
}

func TestGCDisabled(t *testing.T) {
	f := newFixture(t)
	f.save("c-dead", "eth0", cache.PhaseComplete, time.Hour, []string{"okplug"}, cache.StepAdded)
	f.writeConf("10-podnet.conflist", `{"cniVersion":"1.1.0","name":"podnet","plugins":[
	  {"type":"catena","cacheDir":"`+f.cacheDir+`","disableGC":true,"delegates":[{"type":"okplug"}]}]}`)
	out, stderr, code := f.run("gc", "--stale-netns")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `gc of network "podnet": 0 torn down, 0 skipped, 0 error(s); disableGC is set: nothing was collected`)
	assert.True(t, f.recordExists("c-dead", "eth0"))
	assert.Empty(t, f.calls())
}

// TestGCPrunesQuarantine: gc prunes quarantine/ to 30 days and 100 files,
// printing what it pruned; --dry-run prunes nothing.
func TestGCPrunesQuarantine(t *testing.T) {
	f := newFixture(t)
	qdir := filepath.Join(f.cacheDir, "quarantine")
	require.NoError(t, os.MkdirAll(qdir, 0o700))
	name := func(i int, ago time.Duration) string {
		return fmt.Sprintf("podnet_c%03d:eth0.%d.json", i, time.Now().Add(-ago).UnixNano())
	}
	old := name(0, 31*24*time.Hour)
	var recent []string
	for i := 1; i <= 102; i++ {
		recent = append(recent, name(i, time.Duration(103-i)*time.Minute)) // recent[0] is the oldest
	}
	for _, n := range append([]string{old}, recent...) {
		require.NoError(t, os.WriteFile(filepath.Join(qdir, n), []byte("corrupt"), 0o600))
	}
	left := func() int {
		entries, err := os.ReadDir(qdir)
		require.NoError(t, err)
		return len(entries)
	}

	out, stderr, code := f.run("gc", "--stale-netns", "--dry-run")
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, out, "pruned")
	assert.Equal(t, 103, left(), "--dry-run prunes nothing")

	out, stderr, code = f.run("gc", "--stale-netns")
	require.Equal(t, 0, code, stderr)
	rows := tableRows(out)
	for _, n := range []string{old, recent[0], recent[1]} {
		assert.True(t, hasRow(rows, "pruned", "quarantined", "record", "-", "-", filepath.Join(qdir, n)), "%s: %s", n, out)
	}
	assert.Contains(t, out, "3 pruned from quarantine")
	assert.Equal(t, 100, left())
	for _, n := range recent[2:] {
		assert.FileExists(t, filepath.Join(qdir, n))
	}

	out, stderr, code = f.run("gc", "--stale-netns", "--json")
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, decodeJSON[map[string]any](t, out), "prunedQuarantine", "nothing more to prune")
	assert.Equal(t, 100, left())
}
