package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
)

func TestDefaultConfIsFirstWithCatenaEntry(t *testing.T) {
	f := newFixture(t)
	f.save("c1", "eth0", cache.PhaseComplete, time.Hour, []string{"okplug"}, cache.StepAdded)
	require.NoError(t, os.Rename(f.confPath, filepath.Join(f.netDir, "20-podnet.conflist")))
	f.writeConf("00-plain.conflist", `{"cniVersion":"1.1.0","name":"plain","plugins":[{"type":"bridge"}]}`)
	f.writeConf("05-broken.conf", `{"cniVersion":`)
	f.writeConf("30-other.conf", fmt.Sprintf(`{"cniVersion":"1.1.0","name":"other","type":"catena","cacheDir":%q,"delegates":[{"type":"okplug"}]}`,
		filepath.Join(t.TempDir(), "other")))

	out, stderr, code := f.runRaw("list", "--json")
	require.Equal(t, 0, code, stderr)
	rows := decodeJSON[[]listRow](t, out)
	require.Len(t, rows, 1, "the cache dir of 20-podnet.conflist")
	assert.Equal(t, "c1", rows[0].ContainerID)

	out, _, code = f.runRaw("doctor", "--json", "--cni-path", f.cniDir)
	require.Equal(t, 0, code)
	assert.Contains(t, decodeJSON[doctorOutput](t, out).Checks[0].Detail, filepath.Join(f.netDir, "20-podnet.conflist")+`: network "podnet"`)
}

func TestCacheDirFlag(t *testing.T) {
	f := newFixture(t)
	f.save("c1", "eth0", cache.PhaseComplete, time.Hour, []string{"okplug"}, cache.StepAdded)
	other := filepath.Join(t.TempDir(), "cache")

	t.Run("overrides the config's", func(t *testing.T) {
		out, _, code := f.run("list", "--json", "--cache-dir", other)
		require.Equal(t, 0, code)
		assert.JSONEq(t, `[]`, out)
	})
	t.Run("needs no config", func(t *testing.T) {
		require.NoError(t, os.Remove(f.confPath))
		out, stderr, code := f.runRaw("list", "--json", "--cache-dir", f.cacheDir)
		require.Equal(t, 0, code, stderr)
		assert.Len(t, decodeJSON[[]listRow](t, out), 1)

		_, stderr, code = f.runRaw("list")
		assert.Equal(t, 1, code)
		assert.Equal(t, "catenactl: no network config with a catena entry in "+f.netDir+": pass --conf (or pass --cache-dir)\n", stderr)

		_, stderr, code = f.runRaw("repair", "--cache-dir", f.cacheDir)
		assert.Equal(t, 1, code, "repair needs the config's delegates and network")
		assert.Contains(t, stderr, "no network config with a catena entry")
	})
}

func TestUsageErrors(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"frobnicate"}, `unknown command "frobnicate" for "catenactl"`},
		{[]string{"list", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"list", "extra"}, "accepts 0 arg(s), received 1"},
		{[]string{"stats", "--window", "soon"}, `invalid argument "soon" for "--window"`},
		{[]string{"repair", "--delegate", "x"}, `invalid argument "x" for "--delegate"`},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.args), func(t *testing.T) {
			out, stderr, code := f.run(tt.args...)
			assert.Equal(t, 2, code)
			assert.Empty(t, out)
			assert.Contains(t, stderr, tt.wantErr)
			assert.Contains(t, stderr, "run 'catenactl --help' for usage")
		})
	}
}

// TestHelp: every command documents itself, and --help succeeds without a
// config or a cache dir.
func TestHelp(t *testing.T) {
	f := newFixture(t)
	root := newRootCmd(env{})
	for _, cmd := range root.Commands() {
		if cmd.Name() == "help" || cmd.Name() == "completion" {
			continue
		}
		t.Run(cmd.Name(), func(t *testing.T) {
			assert.NotEmpty(t, cmd.Short)
			assert.NotEmpty(t, cmd.Long)
			out, stderr, code := f.runRaw(cmd.Name(), "--help")
			require.Equal(t, 0, code, stderr)
			assert.Contains(t, out, cmd.Long)
			assert.Contains(t, out, "--json", "the global flags are listed")
		})
	}
	out, _, code := f.runRaw("--help")
	require.Equal(t, 0, code)
	for _, name := range []string{"list", "show", "gc", "repair", "doctor", "stats", "trace", "metrics"} {
		assert.Contains(t, out, "\n  "+name+" ")
	}
}
