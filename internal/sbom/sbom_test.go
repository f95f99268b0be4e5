package sbom

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"
)

// repo is the module's root, from this package's dir.
const repo = "../.."

// binDir is make's bin/ (CATENA_BIN), where make build puts the binaries.
func binDir() string {
	if b := os.Getenv("CATENA_BIN"); b != "" {
		return b
	}
	return filepath.Join(repo, "bin")
}

// generator is bin/tools/cyclonedx-gomod; without it the test skips, but
// under CI=true it fails: the SBOMs must be checked.
func generator(t *testing.T) string {
	t.Helper()
	path := filepath.Join(binDir(), "tools", "cyclonedx-gomod")
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("cyclonedx-gomod missing at %s (make plugins builds it; CI=true: the SBOMs must be checked): %v", path, err)
		}
		t.Skipf("cyclonedx-gomod missing at %s: run scripts/install-cyclonedx.sh", path)
	}
	abs, err := filepath.Abs(path)
	require.NoError(t, err)
	return abs
}

func generate(t *testing.T, args ...string) *BOM {
	t.Helper()
	out := filepath.Join(t.TempDir(), "bom.json")
	cmd := exec.Command(generator(t), append(append(args[:1:1], "-json", "-output", out), args[1:]...)...)
	cmd.Dir = repo
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "cyclonedx-gomod %v: %s", args, b)
	bom, err := Read(out)
	require.NoError(t, err)
	return bom
}

// TestCheck: a doctored SBOM is caught, a module missing or at another
// version, and an extra one.
func TestCheck(t *testing.T) {
	bom := &BOM{Components: []Component{{Name: "a", Version: "v1.0.0"}, {Name: "b", Version: "v2.0.0"}}}
	tests := []struct {
		name           string
		want           map[string]string
		missing, extra []string
	}{
		{"the same", map[string]string{"a": "v1.0.0", "b": "v2.0.0"}, nil, nil},
		{"a module absent", map[string]string{"a": "v1.0.0", "b": "v2.0.0", "c": "v0.1.0"}, []string{"c@v0.1.0: absent"}, nil},
		{"another version", map[string]string{"a": "v1.0.1", "b": "v2.0.0"}, []string{"a@v1.0.1: the SBOM says v1.0.0"}, nil},
		{"one too many", map[string]string{"a": "v1.0.0"}, nil, []string{"b@v2.0.0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.missing, bom.Missing(tt.want))
			assert.Equal(t, tt.extra, bom.Extra(tt.want))
		})
	}
}

// TestModuleSBOM: the module's SBOM names every module go.mod requires, at
// go.mod's version, and nothing else; the only ones it may leave out are
// those that provide no package to the build or its tests (go list -deps
// -test), kept in go.mod only to pin a version, which are logged.
func TestModuleSBOM(t *testing.T) {
	bom := generate(t, "mod", "-test", ".")
	assert.Equal(t, "github.com/catena-cni/catena", bom.Metadata.Component.Name)
	require.NotEmpty(t, bom.Metadata.Tools)
	assert.Equal(t, "cyclonedx-gomod", bom.Metadata.Tools[0].Name)

	raw, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	require.NoError(t, err)
	mf, err := modfile.Parse("go.mod", raw, nil)
	require.NoError(t, err)
	cmd := exec.Command("go", "list", "-deps", "-test", "-f", "{{with .Module}}{{.Path}}{{end}}", "./...")
	cmd.Dir = repo
	out, err := cmd.Output()
	require.NoError(t, err, "go list")
	used := map[string]bool{}
	for s := bufio.NewScanner(bytes.NewReader(out)); s.Scan(); {
		used[s.Text()] = true
	}
	want := map[string]string{}
	unused := map[string]bool{}
	for _, r := range mf.Require {
		want[r.Mod.Path] = r.Mod.Version
		if !used[r.Mod.Path] {
			unused[r.Mod.Path+"@"+r.Mod.Version+": absent"] = true
		}
	}
	require.NotEmpty(t, want)
	var absent []string
	for _, m := range bom.Missing(want) {
		assert.True(t, unused[m], "go.mod's %s, which the build uses, in the SBOM at its version", m)
		absent = append(absent, strings.TrimSuffix(m, ": absent"))
	}
	assert.Empty(t, bom.Extra(want), "nothing go.mod does not require")
	t.Logf("module SBOM: %d components of go.mod's %d requirements; absent, as no package of the build or its tests on this platform uses them: %s",
		len(bom.Components), len(mf.Require), strings.Join(absent, ", "))
}

// TestBinarySBOMs: each shipped binary's SBOM names exactly the modules
// its build info records, at their versions.
func TestBinarySBOMs(t *testing.T) {
	for _, name := range []string{"catena", "catenactl", "catena-agent"} {
		t.Run(name, func(t *testing.T) {
			path, err := filepath.Abs(filepath.Join(binDir(), name))
			require.NoError(t, err)
			info, err := buildinfo.ReadFile(path)
			require.NoError(t, err, "build it first: make build")
			want := map[string]string{}
			for _, d := range info.Deps {
				if d.Replace != nil {
					d = d.Replace
				}
				want[d.Path] = d.Version
			}
			bom := generate(t, "bin", path)
			assert.Empty(t, bom.Missing(want), "every module linked into %s", name)
			assert.Empty(t, bom.Extra(want))
			b, err := json.Marshal(bom.Metadata.Component)
			require.NoError(t, err)
			t.Logf("%s: %d modules; %s", name, len(want), b)
		})
	}
}
