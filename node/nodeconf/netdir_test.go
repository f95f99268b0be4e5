package nodeconf

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain"
)

const (
	tuningConf  = `{"cniVersion":"1.0.0","type":"tuning","mtu":1400}`
	portmapConf = `{"type":"portmap","capabilities":{"portMappings":true}}`
)

// generatedList is the generated file as the tests look at it: libcni
// v1.3's reading of its list fields (the runtime's view), the catena
// plugin's delegates and capabilities, and the generated key.
type generatedList struct {
	list      *libcni.NetworkConfigList
	delegates []string
	caps      map[string]bool
	// netDir is the generated key's record of the network dir's files.
	netDir []struct {
		File   string `json:"file"`
		SHA256 string `json:"sha256"`
	}
	raw map[string]json.RawMessage
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func readGenerated(t *testing.T, inst *Installer) generatedList {
	t.Helper()
	out := generatedFile(t, inst)
	require.NotNil(t, out, "no generated file")
	var g generatedList
	var err error
	g.list, err = libcni.NetworkConfFromBytes(out)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(out, &g.raw))
	var plugins struct {
		Plugins []struct {
			Type         string            `json:"type"`
			Capabilities map[string]bool   `json:"capabilities"`
			Delegates    []json.RawMessage `json:"delegates"`
		} `json:"plugins"`
	}
	require.NoError(t, json.Unmarshal(out, &plugins))
	require.Len(t, plugins.Plugins, 1)
	require.Equal(t, "catena", plugins.Plugins[0].Type)
	for _, d := range plugins.Plugins[0].Delegates {
		g.delegates = append(g.delegates, string(d))
	}
	g.caps = plugins.Plugins[0].Capabilities
	_, ok := ReadGenerated(out)
	require.True(t, ok)
	var m struct {
		Generated struct {
			NetworkDir json.RawMessage `json:"networkDir"`
		} `json:"catena.dev/generated"`
	}
	require.NoError(t, json.Unmarshal(out, &m))
	if m.Generated.NetworkDir != nil {
		require.NoError(t, json.Unmarshal(m.Generated.NetworkDir, &g.netDir))
	}
	_, err = libchain.CatenaConf(out)
	require.NoError(t, err, "catena refuses the generated file")
	return g
}

func assertDelegates(t *testing.T, want []string, got []string) {
	t.Helper()
	require.Len(t, got, len(want), "delegates: %v", got)
	for n := range want {
		assert.JSONEq(t, want[n], got[n], "delegate %d", n)
	}
}

// TestSyncWrapsNetworkDir: libcni v1.3 (containerd 2.1 and later, CRI-O
// 1.33 and later) appends <conf dir>/<network>/*.conf, in lexical order,
// to a .conflist's plugins unless the list sets loadOnlyInlinedPlugins; a
// .conf or .json primary is read as one plugin, without the dir. Catena
// wraps exactly those plugins, records the files in the generated key, and sets
// loadOnlyInlinedPlugins in the generated file, which has the primary's
// network name: otherwise the runtime would run the dir's plugins a second
// time, after catena.
func TestSyncWrapsNetworkDir(t *testing.T) {
	bridge := `{"type":"bridge","bridge":"cni0"}`
	for _, tc := range []struct {
		name      string
		files     map[string]string
		wantDels  []string
		wantFiles []string
		wantCaps  map[string]bool
	}{
		{
			name: "plugins in the network dir follow the inline ones, lexically",
			files: map[string]string{
				"10-a.conflist":              `{"cniVersion":"1.0.0","name":"podnet","plugins":[` + bridge + `]}`,
				"podnet/20-portmap.conf":     portmapConf,
				"podnet/10-tuning.conf":      tuningConf,
				"podnet/30-skipped.json":     `{"type":"json-is-not-read"}`,
				"podnet/40-skipped.conflist": `{"type":"conflist-is-not-read"}`,
				"podnet/sub.conf/x.conf":     `{"type":"a-dir-is-not-read"}`,
				"other/10-x.conf":            `{"type":"another-networks-dir"}`,
			},
			wantDels:  []string{bridge, `{"type":"tuning","mtu":1400}`, portmapConf},
			wantFiles: []string{"podnet/10-tuning.conf", "podnet/20-portmap.conf"},
			wantCaps:  map[string]bool{"portMappings": true},
		},
		{
			name: "a list of no inline plugins takes them all from the dir",
			files: map[string]string{
				"10-a.conflist":         `{"cniVersion":"1.0.0","name":"podnet"}`,
				"podnet/10-bridge.conf": bridge,
			},
			wantDels:  []string{bridge},
			wantFiles: []string{"podnet/10-bridge.conf"},
		},
		{
			name: "loadOnlyInlinedPlugins: the dir is not read",
			files: map[string]string{
				"10-a.conflist":         `{"cniVersion":"1.0.0","name":"podnet","loadOnlyInlinedPlugins":true,"plugins":[` + bridge + `]}`,
				"podnet/10-tuning.conf": tuningConf,
			},
			wantDels: []string{bridge},
		},
		{
			name: "loadOnlyInlinedPlugins as a string, as libcni reads it",
			files: map[string]string{
				"10-a.conflist":         `{"cniVersion":"1.0.0","name":"podnet","loadOnlyInlinedPlugins":"True","plugins":[` + bridge + `]}`,
				"podnet/10-tuning.conf": tuningConf,
			},
			wantDels: []string{bridge},
		},
		{
			name: "a .conf primary is one plugin, without the dir",
			files: map[string]string{
				"10-a.conf":             `{"cniVersion":"1.0.0","name":"podnet","type":"bridge","bridge":"cni0"}`,
				"podnet/10-tuning.conf": tuningConf,
			},
			wantDels: []string{bridge},
		},
		{
			name:     "no network dir",
			files:    map[string]string{"10-a.conflist": `{"cniVersion":"1.0.0","name":"podnet","plugins":[` + bridge + `]}`},
			wantDels: []string{bridge},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst, _ := newTestInstaller(t, tc.files)
			var adopted []string
			inst.Adopt = func(_ context.Context, p *Primary) error {
				adopted = nil
				for _, dp := range p.DirPlugins {
					adopted = append(adopted, dp.File)
				}
				return nil
			}
			mustSync(t, inst)
			assert.Equal(t, tc.wantFiles, adopted, "adoption is given the dir's plugins")
			g := readGenerated(t, inst)
			assert.True(t, g.list.LoadOnlyInlinedPlugins, "the runtime must not append the dir's plugins after catena")
			assert.Len(t, g.list.Plugins, 1)
			assertDelegates(t, tc.wantDels, g.delegates)
			assert.Equal(t, tc.wantCaps, g.caps)
			var files []string
			for _, f := range g.netDir {
				files = append(files, f.File)
				data, err := afero.ReadFile(inst.Fs, filepath.Join(confDir, f.File))
				require.NoError(t, err)
				assert.Equal(t, sha256Hex(data), f.SHA256, f.File)
			}
			assert.Equal(t, tc.wantFiles, files)
			require.NoError(t, inst.Current(), "ready")
		})
	}
}

// TestSyncRefusesBadNetworkDir: a plugin file libcni would refuse (the
// runtime then fails to load the conf dir, or skips the primary) or one
// that is Catena's refuses the primary: nothing is written.
func TestSyncRefusesBadNetworkDir(t *testing.T) {
	for _, tc := range []struct {
		name, file, data, wantErr string
	}{
		{"half-written", "podnet/10-x.conf", `{"type":"tun`, "podnet/10-x.conf: not valid JSON"},
		{"no type", "podnet/10-x.conf", `{"mtu":1400}`, "podnet/10-x.conf: error parsing configuration: missing 'type'"},
		{"catena", "podnet/10-x.conf", `{"type":"catena","delegates":[{"type":"bridge"}]}`, "podnet/10-x.conf: already contains catena"},
		{"bad type", "podnet/10-x.conf", `{"type":"../evil"}`, "catena would refuse the result"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst, _ := newTestInstaller(t, map[string]string{"10-a.conflist": bridgeCL, tc.file: tc.data})
			_, err := inst.Sync(context.Background())
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
			assert.Nil(t, generatedFile(t, inst), "nothing may be written")
		})
	}
}

// TestSyncFollowsNetworkDir: a plugin file added to, changed in or removed
// from the network dir changes what the runtime would run: readiness says
// the generated file is no longer current, and the next pass rewraps.
func TestSyncFollowsNetworkDir(t *testing.T) {
	inst, _ := newTestInstaller(t, map[string]string{"10-a.conflist": bridgeCL})
	mustSync(t, inst)
	require.Len(t, readGenerated(t, inst).delegates, 3)

	tuning := filepath.Join(confDir, "podnet", "10-tuning.conf")
	for _, step := range []struct {
		name string
		do   func() error
		want int
	}{
		{"added", func() error { return afero.WriteFile(inst.Fs, tuning, []byte(tuningConf), 0o644) }, 4},
		{"changed", func() error { return afero.WriteFile(inst.Fs, tuning, []byte(`{"type":"tuning","mtu":1300}`), 0o644) }, 4},
		{"removed", func() error { return inst.Fs.Remove(tuning) }, 3},
	} {
		require.NoError(t, step.do(), step.name)
		assert.ErrorContains(t, inst.Current(), "is not what catena-agent writes", step.name)
		st := mustSync(t, inst)
		assert.True(t, st.Wrote, step.name)
		g := readGenerated(t, inst)
		assert.Len(t, g.delegates, step.want, step.name)
		require.NoError(t, inst.Current(), step.name)
	}
	assert.NotContains(t, readGenerated(t, inst).delegates[2], "tuning")
}

// TestSyncNetworkDirModeNarrows: the generated file embeds the dir's
// plugin configs, so it is never more permissive than any of them.
func TestSyncNetworkDirModeNarrows(t *testing.T) {
	inst, _ := newTestInstaller(t, map[string]string{"10-a.conflist": bridgeCL})
	require.NoError(t, afero.WriteFile(inst.Fs, filepath.Join(confDir, "podnet", "10-secret.conf"), []byte(`{"type":"tuning","token":"s3cret"}`), 0o600))
	mustSync(t, inst)
	fi, err := inst.Fs.Stat(filepath.Join(confDir, ownName))
	require.NoError(t, err)
	assert.Equal(t, "-rw-------", fi.Mode().Perm().String())
}

// TestWrapKeepsVersionsAsWritten: cniVersion and cniVersions are copied as
// written, so that every runtime picks the version it picked for the
// primary (libcni 1.2 and later: the highest it supports of both; older
// ones read cniVersion only); catena reads the version libcni v1.3 picks.
func TestWrapKeepsVersionsAsWritten(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       string
	}{
		{"both", `{"cniVersion":"0.4.0","cniVersions":["1.0.0","9.9.9"],"name":"podnet","plugins":[{"type":"bridge"}]}`, "1.0.0"},
		{"cniVersions only", `{"cniVersions":["0.4.0","1.1.0"],"name":"podnet","plugins":[{"type":"bridge"}]}`, "1.1.0"},
		{"cniVersion only", `{"cniVersion":"0.4.0","name":"podnet","plugins":[{"type":"bridge"}]}`, "0.4.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst, _ := newTestInstaller(t, map[string]string{"10-a.conflist": tc.data})
			mustSync(t, inst)
			g := readGenerated(t, inst)
			var primary map[string]json.RawMessage
			require.NoError(t, json.Unmarshal([]byte(tc.data), &primary))
			for _, k := range []string{"cniVersion", "cniVersions"} {
				if primary[k] == nil {
					assert.Nil(t, g.raw[k], k)
				} else {
					assert.JSONEq(t, string(primary[k]), string(g.raw[k]), k)
				}
			}
			assert.Equal(t, tc.want, g.list.CNIVersion, "libcni's pick")
			conf, err := libchain.CatenaConf(generatedFile(t, inst))
			require.NoError(t, err)
			assert.Equal(t, tc.want, conf.CNIVersion, "catena's pick")
		})
	}
}

// TestWrapDropsPluginVersions: libcni sends every plugin the list's name
// and cniVersion, whatever its own config says; catena honours a
// delegate's own cniVersion, so the wrapped delegates carry none and
// inherit the list's, as they did under the runtime.
func TestWrapDropsPluginVersions(t *testing.T) {
	inst, _ := newTestInstaller(t, map[string]string{
		"10-a.conflist":         `{"cniVersion":"1.1.0","name":"podnet","plugins":[{"cniVersion":"0.3.1","name":"x","type":"bridge"}]}`,
		"podnet/10-tuning.conf": `{"cniVersion":"0.4.0","name":"y","type":"tuning"}`,
	})
	mustSync(t, inst)
	assertDelegates(t, []string{`{"type":"bridge"}`, `{"type":"tuning"}`}, readGenerated(t, inst).delegates)
	conf, err := libchain.CatenaConf(generatedFile(t, inst))
	require.NoError(t, err)
	for _, d := range conf.Delegates {
		assert.Equal(t, "1.1.0", d.CNIVersion, d.String())
	}
}

// TestSyncNetworkDirIgnored: with a runtime that reads no network dir
// (--network-dir-plugins=ignore: containerd 2.0 and earlier, CRI-O 1.32
// and earlier) the dir's plugins are not wrapped, as the runtime never ran
// them; the generated file still says loadOnlyInlinedPlugins, so that an
// upgraded runtime does not run them after catena.
func TestSyncNetworkDirIgnored(t *testing.T) {
	inst, _ := newTestInstaller(t, map[string]string{"10-a.conflist": bridgeCL, "podnet/10-tuning.conf": tuningConf})
	inst.Cfg.NetworkDir = NetworkDirIgnore
	st := mustSync(t, inst)
	assert.Empty(t, st.NetworkDir)
	g := readGenerated(t, inst)
	assert.Len(t, g.delegates, 3)
	assert.Empty(t, g.netDir)
	assert.True(t, g.list.LoadOnlyInlinedPlugins)

	inst.Cfg.NetworkDir = "sometimes"
	_, err := inst.Sync(context.Background())
	assert.ErrorContains(t, err, `network dir mode "sometimes": must be load or ignore`)
}

// TestSyncRefusesNoPlugins: a conflist without a plugins list is valid for
// libcni v1.3 only with plugins in its network dir ("no plugin configs
// found" otherwise), and never for a runtime that reads no dir.
func TestSyncRefusesNoPlugins(t *testing.T) {
	for _, mode := range []NetworkDirMode{NetworkDirLoad, NetworkDirIgnore} {
		files := map[string]string{"10-a.conflist": `{"cniVersion":"1.0.0","name":"podnet"}`}
		if mode == NetworkDirIgnore {
			files["podnet/10-bridge.conf"] = `{"type":"bridge"}`
		}
		inst, _ := newTestInstaller(t, files)
		inst.Cfg.NetworkDir = mode
		_, err := inst.Sync(context.Background())
		assert.ErrorContains(t, err, "no plugin configs found", string(mode))
		assert.Nil(t, generatedFile(t, inst), string(mode))
	}
}

// TestWrapCountsNetworkDirPluginsForDelAdoption: with a results dir, the
// generated catena plugin says how many of its last delegates came from
// the network dir, so that a DEL adopting a primary-made attachment appends
// them to the cached list as the agent's adoption does; catena parses them
// back as exactly those delegates.
func TestWrapCountsNetworkDirPluginsForDelAdoption(t *testing.T) {
	bridge := `{"type":"bridge","bridge":"cni0"}`
	files := map[string]string{
		"10-a.conflist":          `{"cniVersion":"1.0.0","name":"podnet","plugins":[` + bridge + `]}`,
		"podnet/10-tuning.conf":  tuningConf,
		"podnet/20-portmap.conf": portmapConf,
	}
	for _, tc := range []struct {
		name       string
		resultsDir string
		want       int
	}{
		{name: "with a results dir", resultsDir: "/var/lib/cni/results", want: 2},
		{name: "without", resultsDir: "", want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst, _ := newTestInstaller(t, files)
			inst.Cfg.Catena.LibcniResultsDir = tc.resultsDir
			mustSync(t, inst)
			conf, err := libchain.CatenaConf(generatedFile(t, inst))
			require.NoError(t, err)
			require.Len(t, conf.LibcniNetworkDirPlugins, tc.want)
			if tc.want > 0 {
				assert.JSONEq(t, `{"type":"tuning","mtu":1400}`, string(conf.LibcniNetworkDirPlugins[0]))
				assert.Contains(t, string(conf.LibcniNetworkDirPlugins[1]), `"portmap"`)
			}
		})
	}
}
