package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/internal/clitest"
)

const primaryCL = `{"cniVersion":"1.0.0","name":"podnet","plugins":[{"type":"bridge","bridge":"cni0"},{"type":"portmap","capabilities":{"portMappings":true}}]}`

// node is a private conf dir, bin dir, source dir of binaries, cache dir,
// and dir of the plugins the primaries name (stand-ins: only their
// presence is checked).
type node struct {
	conf, bin, src, cache, plugins string
}

// pluginTypes are the plugins newNode puts in the node's plugins dir.
var pluginTypes = []string{"bridge", "portmap", "tuning"}

func newNode(t *testing.T, files map[string]string) node {
	t.Helper()
	root := t.TempDir()
	n := node{conf: filepath.Join(root, "net.d"), bin: filepath.Join(root, "bin"), src: filepath.Join(root, "src"), cache: filepath.Join(root, "cache"),
		plugins: filepath.Join(root, "plugins")}
	for _, d := range []string{n.conf, n.bin, n.src, n.plugins} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	for _, p := range pluginTypes {
		require.NoError(t, os.WriteFile(filepath.Join(n.plugins, p), []byte("#!plugin "+p), 0o755))
	}
	for _, b := range []string{"catena", "catenactl"} {
		require.NoError(t, os.WriteFile(filepath.Join(n.src, b), []byte("#!binary "+b), 0o755))
	}
	for name, data := range files {
		require.NoError(t, os.WriteFile(filepath.Join(n.conf, name), []byte(data), 0o644))
	}
	return n
}

func (n node) installArgs(extra ...string) []string {
	return append([]string{"--cni-conf-dir", n.conf, "--cni-bin-dir", n.bin, "--cni-path", n.plugins + ":" + n.bin, "--source-dir", n.src,
		"--cache-dir", n.cache, "--results-dir", ""}, extra...)
}

// agent runs catena-agent in process and returns its exit code, stdout and
// stderr.
func runAgent(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runContext(context.Background(), args, env{stdout: &out, stderr: &errb, fs: afero.NewOsFs(), selfDir: "/nonexistent"})
	return code, out.String(), errb.String()
}

func readDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		got[e.Name()] = string(data)
	}
	return got
}

// TestInstallOnceAndUninstall: install --once writes the generated file and
// the binaries, a second pass writes nothing and exits 0, uninstall removes
// only Catena's files and lists the records left.
func TestInstallOnceAndUninstall(t *testing.T) {
	n := newNode(t, map[string]string{"10-bridge.conflist": primaryCL})
	code, out, stderr := runAgent(t, append([]string{"install", "--once"}, n.installArgs()...)...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "00-catena.conflist: written, wrapping 10-bridge.conflist")
	files := readDir(t, n.conf)
	require.Len(t, files, 2)
	assert.Contains(t, files["00-catena.conflist"], `"catena.dev/generated"`)
	assert.Equal(t, map[string]string{"catena": "#!binary catena", "catenactl": "#!binary catenactl"}, readDir(t, n.bin))

	code, out, stderr = runAgent(t, append([]string{"install", "--once"}, n.installArgs()...)...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "already in place")

	code, out, stderr = runAgent(t, "uninstall", "--cni-conf-dir", n.conf, "--cni-bin-dir", n.bin, "--cache-dir", n.cache)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "removed "+filepath.Join(n.conf, "00-catena.conflist"))
	assert.Contains(t, out, "0 attachment(s) still have a record")
	assert.Equal(t, map[string]string{"10-bridge.conflist": primaryCL}, readDir(t, n.conf), "the primary is untouched")
	assert.Empty(t, readDir(t, n.bin))
}

// TestInstallOnceBadInput: exit 1, a message naming the problem, nothing
// written (neither config nor binaries).
func TestInstallOnceBadInput(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		args    []string
		wantErr string
		code    int
	}{
		{name: "no primary", wantErr: "no primary network config", code: 1},
		{name: "invalid primary", files: map[string]string{"10-a.conflist": `{"name":`}, wantErr: "primary 10-a.conflist: not valid JSON", code: 1},
		{name: "slash in type", files: map[string]string{"10-a.conflist": `{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"/usr/bin/evil"}]}`}, wantErr: "must be a plain binary name", code: 1},
		{name: "contains catena", files: map[string]string{"10-a.conflist": `{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"catena","delegates":[{"type":"bridge"}]}]}`}, wantErr: "already contains catena", code: 1},
		{name: "relative cache dir", files: map[string]string{"10-a.conflist": primaryCL}, args: []string{"--cache-dir", "rel"}, wantErr: "cacheDir", code: 1},
		{name: "relative results dir", files: map[string]string{"10-a.conflist": primaryCL}, args: []string{"--results-dir", "var/lib/cni/results"}, wantErr: "--results-dir \"var/lib/cni/results\": must be an absolute path", code: 2},
		{name: "conf name not a list", files: map[string]string{"10-a.conflist": primaryCL}, args: []string{"--conf-name", "00-catena.conf"}, wantErr: "must end in .conflist", code: 2},
		{name: "network dir mode", files: map[string]string{"10-a.conflist": primaryCL}, args: []string{"--network-dir-plugins", "sometimes"}, wantErr: `network dir mode "sometimes": must be load or ignore`, code: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, tc.files)
			code, _, stderr := runAgent(t, append(append([]string{"install", "--once"}, n.installArgs()...), tc.args...)...)
			assert.Equal(t, tc.code, code)
			assert.Contains(t, stderr, tc.wantErr)
			if tc.files == nil {
				tc.files = map[string]string{}
			}
			assert.Equal(t, tc.files, readDir(t, n.conf), "nothing written")
			assert.Empty(t, readDir(t, n.bin), "no binary installed")
		})
	}
}

// TestInstallNamesResultsDir: the generated file carries --results-dir as
// catena's libcniResultsDir, so that a DEL with no record adopts from it;
// with --results-dir "" the key is left out: no adoption at all.
func TestInstallNamesResultsDir(t *testing.T) {
	for _, results := range []string{filepath.Join(t.TempDir(), "results"), ""} {
		n := newNode(t, map[string]string{"10-bridge.conflist": primaryCL})
		code, _, stderr := runAgent(t, append([]string{"install", "--once"}, n.installArgs("--results-dir", results)...)...)
		require.Equal(t, 0, code, stderr)
		var gen struct {
			Plugins []map[string]any `json:"plugins"`
		}
		require.NoError(t, json.Unmarshal([]byte(readDir(t, n.conf)["00-catena.conflist"]), &gen))
		require.Len(t, gen.Plugins, 1)
		got, ok := gen.Plugins[0]["libcniResultsDir"]
		if results == "" {
			assert.False(t, ok, "libcniResultsDir without a results dir: %v", got)
			continue
		}
		assert.Equal(t, results, got)
	}
}

// TestUninstallLeavesForeignFile: a file at the generated name without the
// generated key is not removed, and uninstall fails saying so.
func TestUninstallLeavesForeignFile(t *testing.T) {
	n := newNode(t, map[string]string{"00-catena.conflist": primaryCL})
	code, _, stderr := runAgent(t, "uninstall", "--cni-conf-dir", n.conf, "--cache-dir", n.cache)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "not generated by catena-agent (no catena.dev/generated key); left in place")
	assert.Equal(t, map[string]string{"00-catena.conflist": primaryCL}, readDir(t, n.conf))
}

// TestFlagsFromEnv: a flag not on the command line is taken from its
// CATENA_AGENT_ variable; the command line wins; a bad value is a usage
// error.
func TestFlagsFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name     string
		vars     map[string]string
		args     []string
		wantCode int
		want     []string
	}{
		{name: "env", vars: map[string]string{"CATENA_AGENT_LOCK_TIMEOUT": "7s", "CATENA_AGENT_CATENA_LOG_LEVEL": "debug"}, want: []string{`"lockTimeout": "7s"`, `"logLevel": "debug"`}},
		{name: "flag wins", vars: map[string]string{"CATENA_AGENT_LOCK_TIMEOUT": "7s"}, args: []string{"--lock-timeout", "9s"}, want: []string{`"lockTimeout": "9s"`}},
		{name: "bad value", vars: map[string]string{"CATENA_AGENT_DELEGATE_TIMEOUT": "soon"}, wantCode: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, map[string]string{"10-bridge.conflist": primaryCL})
			var out, errb bytes.Buffer
			args := append(append([]string{"install", "--once"}, n.installArgs()...), tc.args...)
			code := runContext(context.Background(), args, env{stdout: &out, stderr: &errb, fs: afero.NewOsFs(), getenv: func(k string) string { return tc.vars[k] }})
			require.Equal(t, tc.wantCode, code, errb.String())
			if code != 0 {
				assert.Contains(t, errb.String(), `CATENA_AGENT_DELEGATE_TIMEOUT="soon"`)
				return
			}
			got := readDir(t, n.conf)["00-catena.conflist"]
			for _, w := range tc.want {
				assert.Contains(t, got, w)
			}
		})
	}
}

// TestErrorsAreTerminalSafe: an error carrying text from the node's files
// (here the name of an invalid primary, with terminal escapes) reaches
// stderr escaped, shown and never obeyed.
func TestErrorsAreTerminalSafe(t *testing.T) {
	n := newNode(t, map[string]string{"10-x\x1b]0;owned\x07\x1b[2J\u202eevil.conflist": `{"name":`})
	code, _, stderr := runAgent(t, append([]string{"install", "--once"}, n.installArgs()...)...)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, `10-x\x1b]0;owned\x07\x1b[2J\u202eevil.conflist: not valid JSON`, "the name is shown, escaped")
	clitest.AssertTerminalSafe(t, stderr, "catena-agent's stderr")
}

// TestInstallRefusesMissingPlugin: a primary naming a plugin binary in none
// of the --cni-path dirs (by default the --cni-bin-dir) is not wrapped:
// exit 1, a message naming the file, the plugin, the dirs and what to do,
// and the generated file as it was; once the binary is there, it is.
func TestInstallRefusesMissingPlugin(t *testing.T) {
	calico := `{"cniVersion":"0.3.1","name":"k8s-pod-network","plugins":[{"type":"calico"},{"type":"bandwidth","capabilities":{"bandwidth":true}}]}`
	for _, tc := range []struct {
		name, dir string // dir: where the test installs calico and bandwidth
		args      func(n node) []string
	}{
		{name: "--cni-path", dir: "extra", args: func(n node) []string {
			return []string{"--cni-path", n.plugins + ":" + filepath.Join(filepath.Dir(n.bin), "extra")}
		}},
		{name: "default: --cni-bin-dir", dir: "bin", args: func(n node) []string {
			return []string{"--cni-conf-dir", n.conf, "--cni-bin-dir", n.bin, "--source-dir", n.src, "--cache-dir", n.cache, "--results-dir", ""}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, map[string]string{"10-bridge.conflist": primaryCL})
			args := append(append([]string{"install", "--once"}, n.installArgs()...), tc.args(n)...)
			if tc.dir == "bin" {
				args = append([]string{"install", "--once"}, tc.args(n)...)
				for _, p := range pluginTypes {
					require.NoError(t, os.WriteFile(filepath.Join(n.bin, p), []byte("#!plugin "+p), 0o755))
				}
			}
			code, _, stderr := runAgent(t, args...)
			require.Equal(t, 0, code, stderr)
			before := readDir(t, n.conf)

			require.NoError(t, os.WriteFile(filepath.Join(n.conf, "10-bridge.conflist"), []byte(calico), 0o644))
			code, _, stderr = runAgent(t, args...)
			assert.Equal(t, 1, code)
			dir := filepath.Join(filepath.Dir(n.bin), tc.dir)
			for _, want := range []string{`primary 10-bridge.conflist: plugin 0, "calico": plugin binary missing`, dir + " (--cni-path)",
				`Install "calico" there`, "or set --cni-path to the runtime's CNI bin dirs", "nothing written, 00-catena.conflist stays as it was"} {
				assert.Contains(t, stderr, want)
			}
			before["10-bridge.conflist"] = calico
			assert.Equal(t, before, readDir(t, n.conf), "the generated file stays as it was")

			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "calico"), []byte("#!calico"), 0o755))
			code, _, stderr = runAgent(t, args...)
			assert.Equal(t, 1, code)
			assert.Contains(t, stderr, `plugin 1, "bandwidth": plugin binary missing`)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "bandwidth"), []byte("#!bandwidth"), 0o755))
			code, out, stderr := runAgent(t, args...)
			require.Equal(t, 0, code, stderr)
			assert.Contains(t, out, "written, wrapping 10-bridge.conflist")
			assert.Contains(t, readDir(t, n.conf)["00-catena.conflist"], `"type": "calico"`)
		})
	}
}
