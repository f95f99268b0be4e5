package installtest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"

	"github.com/catena-cni/catena/internal/silent"
)

const flannelModule = "github.com/flannel-io/cni-plugin"

// noFlannel asserts that dir holds neither flannel nor its version file.
func noFlannel(t *testing.T, dir string) {
	t.Helper()
	assert.NoFileExists(t, filepath.Join(dir, "flannel"))
	assert.NoFileExists(t, filepath.Join(dir, ".flannel.version"))
}

// silentProxy is a module proxy that accepts connections and never
// answers: the probe's bound is all that ends a request to it.
func silentProxy(t *testing.T) string {
	t.Helper()
	addr, _ := silent.Listen(t, "127.0.0.1:0")
	return "http://" + addr + "/"
}

// With no module proxy and no pinned source, install-flannel.sh stops
// within a minute with one message naming what is missing and both ways to
// provide it, and writes nothing.
func TestInstallFlannelNoSource(t *testing.T) {
	version := pins(t)["FLANNEL_VERSION"]
	require.NotEmpty(t, version)
	for _, tc := range []struct {
		name  string
		proxy string
		// why the proxy gave nothing, as the message says it
		why string
	}{
		// Nothing listens on the discard port: refused at once.
		{name: "proxy refuses", proxy: "http://127.0.0.1:9/", why: "127.0.0.1:9: connect: connection refused"},
		{name: "proxy never answers", proxy: silentProxy(t), why: "no answer in 2 s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, vendorSrc := t.TempDir(), t.TempDir()
			res := runScript(t, "install-flannel.sh", time.Minute,
				"CATENA_FLANNEL_OUT="+out,
				"CATENA_VENDOR_SRC="+vendorSrc,
				"GOPROXY="+tc.proxy,
				"CATENA_FLANNEL_PROBE_TIMEOUT=2",
				"GOFLAGS=-mod=mod",
				"GONOSUMDB=github.com/flannel-io",
				// An empty module cache: a flannel module cached on this
				// machine would answer in the proxy's stead.
				"GOMODCACHE="+t.TempDir(),
			)

			var exit *exec.ExitError
			require.ErrorAs(t, res.err, &exit, "install-flannel.sh succeeded with no source:\n%s", res.stderr)
			assert.Equal(t, 1, exit.ExitCode())
			assert.Less(t, res.elapsed, time.Minute)
			t.Logf("stopped in %s:\n%s", res.elapsed.Round(time.Millisecond), res.stderr)
			assert.Equal(t, 1, strings.Count(res.stderr, "error:"), "one message")
			for _, phrase := range []string{
				"install-flannel: error: flannel's CNI plugin " + version + " has no source to build from",
				"the Go module proxy (GOPROXY=" + tc.proxy + ") gave no " + flannelModule + "@" + version + ": ",
				tc.why,
				"its pinned source is not at " + filepath.Join(vendorSrc, "flannel-cni-plugin"),
				"CATENA_VENDOR_SRC=/path/to/vendor-src: a dir holding flannel-cni-plugin/ at the pinned release " + version,
				"a network whose Go module proxy serves " + flannelModule + "@" + version,
			} {
				assert.Contains(t, res.stderr, phrase)
			}
			noFlannel(t, out)
		})
	}
}

// vendorSrc finds the shared vendor-src dir as install-flannel.sh does:
// CATENA_VENDOR_SRC, or ../shared/vendor-src beside the checkout or, for a
// git worktree, beside the main checkout; "" when there is none.
func vendorSrc(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("CATENA_VENDOR_SRC"); dir != "" {
		return dir
	}
	root := repoRoot(t)
	candidates := []string{filepath.Join(root, "..", "shared", "vendor-src")}
	cmd := exec.Command("git", "rev-parse", "--path-format=absolute", "--git-common-dir")
	cmd.Dir = root
	if common, err := cmd.Output(); err == nil && filepath.Base(strings.TrimSpace(string(common))) == ".git" {
		main := filepath.Dir(strings.TrimSpace(string(common)))
		candidates = append(candidates, filepath.Join(main, "..", "shared", "vendor-src"))
	}
	for _, dir := range candidates {
		if _, err := os.Stat(filepath.Join(dir, "flannel-cni-plugin", "go.mod")); err == nil {
			return dir
		}
	}
	return ""
}

// fileProxy writes a GOPROXY=file:// tree under dir serving mod, made from
// the module's source in src: @v/list, .info, .mod and .zip.
func fileProxy(t *testing.T, dir string, mod module.Version, src string) {
	t.Helper()
	at := filepath.Join(dir, mod.Path, "@v")
	require.NoError(t, os.MkdirAll(at, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(at, "list"), []byte(mod.Version+"\n"), 0o644))
	info, err := json.Marshal(map[string]string{"Version": mod.Version, "Time": "2026-01-01T00:00:00Z"})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(at, mod.Version+".info"), info, 0o644))
	gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(at, mod.Version+".mod"), gomod, 0o644))
	z, err := os.Create(filepath.Join(at, mod.Version+".zip"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = z.Close() })
	require.NoError(t, modzip.CreateFromDir(z, mod, src))
	require.NoError(t, z.Close())
}

// goEnv is `go env NAME` as this test's environment has it.
func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// When the module proxy serves flannel's pinned release, install-flannel.sh
// builds it from there, static, with its version line, into the output dir,
// without the pinned source; a second run finds it there, offline.
func TestInstallFlannelFromModuleProxy(t *testing.T) {
	p := pins(t)
	version, commit := p["FLANNEL_VERSION"], p["FLANNEL_COMMIT"]
	require.NotEmpty(t, version)
	shared := vendorSrc(t)
	if shared == "" {
		t.Skip("no pinned flannel source (../shared/vendor-src or CATENA_VENDOR_SRC) to make the module proxy's copy from")
	}
	proxy, out := t.TempDir(), t.TempDir()
	fileProxy(t, proxy, module.Version{Path: flannelModule, Version: version}, filepath.Join(shared, "flannel-cni-plugin"))

	env := []string{
		"CATENA_FLANNEL_OUT=" + out,
		// No pinned source: the module proxy is the only way.
		"CATENA_VENDOR_SRC=" + t.TempDir(),
		// flannel from the test's proxy, its dependencies from this
		// machine's module cache when it has them, else from its proxy.
		"GOPROXY=file://" + proxy + ",file://" + filepath.Join(goEnv(t, "GOMODCACHE"), "cache", "download") + "," + goEnv(t, "GOPROXY"),
		// The test's copy of flannel is not the one the checksum database
		// knows, if it knows one: only flannel is not looked up there.
		"GONOSUMDB=github.com/flannel-io",
		// A private module cache, writable so that t.TempDir removes it:
		// the test's copy of flannel never reaches this machine's.
		"GOMODCACHE=" + t.TempDir(),
		"GOFLAGS=-mod=mod -modcacherw",
	}
	res := runScript(t, "install-flannel.sh", 10*time.Minute, env...)
	t.Logf("ran in %s:\n%s", res.elapsed.Round(time.Millisecond), res.stderr)
	require.NoError(t, res.err)
	assert.Contains(t, res.stderr, "building flannel "+version+" from the Go module proxy")

	bin := filepath.Join(out, "flannel")
	about, err := exec.Command(bin).CombinedOutput()
	require.NoError(t, err, "%s", about)
	assert.Contains(t, string(about), "CNI Plugin flannel version "+version+" ")
	assert.Contains(t, string(about), "commit "+commit)
	file, err := exec.Command("file", bin).Output()
	if err == nil {
		assert.Contains(t, string(file), "statically linked")
	}
	vfile, err := os.ReadFile(filepath.Join(out, ".flannel.version"))
	require.NoError(t, err)
	assert.Equal(t, "flannel="+version+" commit="+commit+" module="+flannelModule+" static\n", string(vfile))

	// Built already: no proxy needed.
	res = runScript(t, "install-flannel.sh", time.Minute, append(env, "GOPROXY=off")...)
	require.NoError(t, res.err, "%s", res.stderr)
	assert.Contains(t, res.stderr, "flannel "+version+" already in "+out)
}
