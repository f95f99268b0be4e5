package installtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const crioModule = "github.com/cri-o/cri-o"

// crioAptPackages are what install-crio.sh installs with apt before
// anything else.
var crioAptPackages = []string{"libseccomp-dev", "libsqlite3-dev", "libbtrfs-dev", "pkg-config", "gcc", "libc6-dev", "make", "conmon", "runc"}

// requireCRIOAptPackages skips (fails under CI=true, where make plugins has
// installed them) when install-crio.sh would first have to install its
// Debian packages: this test runs as any user and installs nothing.
func requireCRIOAptPackages(t *testing.T) {
	t.Helper()
	for _, p := range crioAptPackages {
		out, err := exec.Command("dpkg-query", "-W", "-f=${Status}", p).Output()
		if err == nil && string(out) == "install ok installed" {
			continue
		}
		msg := "install-crio.sh would install " + p + " with apt (run `make crio` first)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// With no module proxy and no pinned source, install-crio.sh stops at
// once with one message naming what is missing and both ways to provide
// it, and writes nothing.
func TestInstallCRIONoSource(t *testing.T) {
	requireCRIOAptPackages(t)
	version := pins(t)["CRIO_VERSION"]
	require.NotEmpty(t, version)
	for _, tc := range []struct {
		name, proxy, why string
	}{
		// Nothing listens on the discard port: refused at once.
		{name: "proxy refuses", proxy: "http://127.0.0.1:9/", why: "127.0.0.1:9: connect: connection refused"},
		{name: "proxy never answers", proxy: silentProxy(t), why: "no answer in 2 s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, vendorSrc := t.TempDir(), t.TempDir()
			res := runScript(t, "install-crio.sh", time.Minute,
				"CATENA_CRIO_OUT="+out,
				"CATENA_VENDOR_SRC="+vendorSrc,
				"GOPROXY="+tc.proxy,
				"CATENA_CRIO_PROBE_TIMEOUT=2",
				"GONOSUMDB=github.com/cri-o",
				// An empty module cache: a CRI-O module cached on this
				// machine would answer in the proxy's stead.
				"GOMODCACHE="+t.TempDir(),
			)
			var exit *exec.ExitError
			require.ErrorAs(t, res.err, &exit, "install-crio.sh succeeded with no source:\n%s", res.stderr)
			assert.Equal(t, 1, exit.ExitCode())
			t.Logf("stopped in %s:\n%s", res.elapsed.Round(time.Millisecond), res.stderr)
			assert.Equal(t, 1, strings.Count(res.stderr, "error:"), "one message")
			for _, phrase := range []string{
				"install-crio: error: CRI-O " + version + " has no source to build from",
				"the Go module proxy (GOPROXY=" + tc.proxy + ") gave no " + crioModule + "@" + version + ": ",
				tc.why,
				"its pinned source is not at " + filepath.Join(vendorSrc, "cri-o"),
				"CATENA_VENDOR_SRC=/path/to/vendor-src: a dir holding cri-o/ at the pinned release " + version,
				"a network whose Go module proxy serves " + crioModule + "@" + version,
			} {
				assert.Contains(t, res.stderr, phrase)
			}
			entries, err := os.ReadDir(out)
			require.NoError(t, err)
			assert.Empty(t, entries, "nothing written")
		})
	}
}
