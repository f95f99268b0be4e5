package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/node/nodeconf"
)

// wrapWithAgent replaces the fixture's config by what catena-agent
// generates from a primary of one okplug plugin on testNet.
func wrapWithAgent(t *testing.T, f *fixture) { wrapWithAgentMode(t, f, nodeconf.NetworkDirLoad) }

func wrapWithAgentMode(t *testing.T, f *fixture, mode nodeconf.NetworkDirMode) {
	t.Helper()
	require.NoError(t, os.Remove(f.confPath))
	f.writeConf("20-primary.conflist", fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"plugins":[{"type":"okplug"}]}`, testNet))
	inst := &nodeconf.Installer{Fs: afero.NewOsFs(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Cfg: nodeconf.Config{ConfDir: f.netDir, ConfName: "00-catena.conflist", NetworkDir: mode,
			Catena: nodeconf.CatenaOptions{CacheDir: f.cacheDir}}}
	_, err := inst.Sync(context.Background())
	require.NoError(t, err)
	f.confPath = filepath.Join(f.netDir, "00-catena.conflist")
}

// TestDoctorNetworkDir: doctor says what it sees in the network's plugin
// dir (<conf dir>/<network>/*.conf, which libcni v1.3 appends to a
// conflist's plugins): wrapped by the agent and current (ok), changed since
// (problem), run by the runtime after catena (problem: a hand-written
// conflist without loadOnlyInlinedPlugins), not read (ok), or holding a
// file libcni refuses (problem). Without the dir there is no such check
// (TestDoctorHealthy).
func TestDoctorNetworkDir(t *testing.T) {
	tuning := `{"type":"okplug","mtu":1400}`
	for _, tc := range []struct {
		name       string
		setup      func(t *testing.T, f *fixture)
		files      map[string]string
		wantStatus string
		wantText   string
		wantItem   string
	}{
		{name: "wrapped by the agent", files: map[string]string{"10-tuning.conf": tuning},
			setup:      wrapWithAgent,
			wantStatus: statusOK, wantText: "1 plugin file(s), wrapped by catena-agent as delegate 1; loadOnlyInlinedPlugins keeps the runtime from running them again",
			wantItem: "podnet/10-tuning.conf (okplug)"},
		{name: "changed since the agent wrapped them", files: map[string]string{"10-tuning.conf": tuning},
			setup: func(t *testing.T, f *fixture) {
				wrapWithAgent(t, f)
				require.NoError(t, os.WriteFile(filepath.Join(f.netDir, testNet, "20-new.conf"), []byte(`{"type":"okplug"}`), 0o644))
			},
			wantStatus: statusProblem, wantText: "changed since catena-agent wrapped them",
			wantItem: "podnet/20-new.conf (okplug)"},
		{name: "agent told the runtime reads no dir", files: map[string]string{"10-tuning.conf": tuning},
			setup:      func(t *testing.T, f *fixture) { wrapWithAgentMode(t, f, nodeconf.NetworkDirIgnore) },
			wantStatus: statusOK, wantText: "not wrapped: catena-agent runs with --network-dir-plugins=ignore",
			wantItem: "podnet/10-tuning.conf (okplug)"},
		{name: "hand-written conflist: run after catena", files: map[string]string{"10-tuning.conf": tuning},
			wantStatus: statusProblem, wantText: "runs these 1 plugin(s) after catena, outside its records",
			wantItem: "podnet/10-tuning.conf (okplug)"},
		{name: "loadOnlyInlinedPlugins: not read", files: map[string]string{"10-tuning.conf": tuning},
			setup: func(t *testing.T, f *fixture) {
				f.confPath = f.writeConf("10-podnet.conflist", fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"loadOnlyInlinedPlugins":true,
				  "plugins":[{"type":"catena","cacheDir":%q,"delegates":[{"type":"okplug"}]}]}`, testNet, f.cacheDir))
			},
			wantStatus: statusOK, wantText: "not read: the config sets loadOnlyInlinedPlugins"},
		{name: "a file libcni refuses", files: map[string]string{"10-x.conf": `{"mtu":1400}`},
			wantStatus: statusProblem, wantText: "missing 'type'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "okplug")
			require.NoError(t, os.Mkdir(filepath.Join(f.netDir, testNet), 0o755))
			for name, data := range tc.files {
				require.NoError(t, os.WriteFile(filepath.Join(f.netDir, testNet, name), []byte(data), 0o644))
			}
			if tc.setup != nil {
				tc.setup(t, f)
			}
			checks, _, _ := doctorChecks(t, f)
			c, ok := checks["network dir"]
			require.True(t, ok, "no network dir check: %v", checks)
			assert.Equal(t, tc.wantStatus, c.Status, c.Detail)
			assert.Contains(t, c.Detail, tc.wantText)
			assert.Contains(t, c.Detail, filepath.Join(f.netDir, testNet))
			if tc.wantItem != "" {
				assert.Contains(t, c.Items, tc.wantItem)
			}
			if tc.wantStatus == statusProblem {
				assert.NotEmpty(t, c.Hint)
			}
		})
	}
}
