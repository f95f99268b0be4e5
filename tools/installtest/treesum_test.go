package installtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkPinnedSource runs lib.sh's check_pinned_source with args; it
// returns what it printed and whether it passed.
func checkPinnedSource(t *testing.T, args ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"-c", `set -euo pipefail; log() { :; }; source scripts/lib.sh; check_pinned_source "$@"`, "bash"}, args...)...)
	cmd.Dir = repoRoot(t)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil {
		require.ErrorAs(t, err, &exit, "bash: %s", out)
	}
	return strings.TrimSpace(string(out)), err == nil
}

// checkPinned checks vendorSrc/subdir as module example.com/pinned v1.0.0
// at commit c0ffee, wanting sha.
func checkPinned(t *testing.T, vendorSrc, subdir, sha string) (string, bool) {
	t.Helper()
	return checkPinnedSource(t, vendorSrc, subdir, "pinned", "example.com/pinned", "v1.0.0", "c0ffee", sha, "PINNED")
}

// writeTree writes files (path: content) under dir, and links (path:
// target) as symlinks or, with asText, as files holding the target's text,
// as a checkout without symlinks (git's core.symlinks=false, an archive
// that stores links as files) holds them.
func writeTree(t *testing.T, dir string, files, links map[string]string, asText bool) {
	t.Helper()
	write := func(p, content string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte(content), 0o644)) //nolint:gosec // a test tree
	}
	for p, content := range files {
		write(p, content)
	}
	for p, target := range links {
		if asText {
			write(p, target)
			continue
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755))
		require.NoError(t, os.Symlink(target, filepath.Join(dir, p)))
	}
}

// TestPinnedSourceSumOfSymlinks: a genuine checkout, with symlinks (to a
// file, to a dir, relative from a subdir, one dangling), and a copy that
// holds each link as a file of its target's text (as ../shared/vendor-src
// holds CRI-O's three) hash the same, so one pinned sum holds for both; a
// changed file, or a link retargeted, does not; a link that resolves out
// of the tree fails the check, naming it.
func TestPinnedSourceSumOfSymlinks(t *testing.T) {
	files := map[string]string{
		"go.mod":        "module example.com/pinned\n",
		"main.go":       "package main\n",
		"docs/a.md":     "a\n",
		"docs/sub/b.md": "b\n",
		"other.go":      "package main // other\n",
	}
	links := map[string]string{"alias.go": "main.go", "manual": "docs", "nested/up.md": "../docs/a.md", "gone": "no-such-file"}
	tree := func(t *testing.T, files, links map[string]string, asText bool) string {
		t.Helper()
		vs := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(vs, "README.md"), []byte("| `pinned/` | example.com/pinned | v1.0.0 | c0ffee | MIT |\n"), 0o644)) //nolint:gosec // a test tree
		writeTree(t, filepath.Join(vs, "pinned"), files, links, asText)
		return vs
	}
	sumOf := func(t *testing.T, vs string) string {
		t.Helper()
		out, ok := checkPinned(t, vs, "pinned", "0")
		require.False(t, ok)
		_, after, found := strings.Cut(out, "sha256 of its files ")
		require.True(t, found, out)
		return strings.TrimSuffix(strings.Fields(after)[0], ",")
	}
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{}
		for key, val := range m {
			out[key] = val
		}
		out[k] = v
		return out
	}

	copied := tree(t, files, links, true)
	want := sumOf(t, copied)
	checkout := tree(t, files, links, false)
	out, ok := checkPinned(t, checkout, "pinned", want)
	assert.True(t, ok, "the checkout with its symlinks has the copy's sum: %s", out)
	out, ok = checkPinned(t, copied, "pinned", want)
	assert.True(t, ok, out)

	out, ok = checkPinned(t, tree(t, with(files, "docs/sub/b.md", "B\n"), links, false), "pinned", want)
	assert.False(t, ok, "a changed file")
	assert.Contains(t, out, "is not the pinned v1.0.0 tree")
	_, ok = checkPinned(t, tree(t, files, with(links, "alias.go", "other.go"), false), "pinned", want)
	assert.False(t, ok, "a link retargeted")

	for name, link := range map[string]string{"out of the tree": "/etc/hostname", "out by ..": "../../README.md"} {
		out, ok := checkPinned(t, tree(t, files, map[string]string{"bad": link}, false), "pinned", want)
		assert.False(t, ok, name)
		assert.Contains(t, out, "pinned/bad: a symlink", name)
	}
}

// TestVendorSrcKeepsItsPins: the pinned sums of versions.env hold for the
// trees in vendor-src.
func TestVendorSrcKeepsItsPins(t *testing.T) {
	vs := vendorSrc(t)
	if vs == "" {
		t.Skip("no ../shared/vendor-src or CATENA_VENDOR_SRC")
	}
	p := pins(t)
	for _, tc := range []struct{ subdir, module, v string }{
		{"flannel-cni-plugin", "github.com/flannel-io/cni-plugin", "FLANNEL"},
		{"cri-o", "github.com/cri-o/cri-o", "CRIO"},
	} {
		out, ok := checkPinnedSource(t, vs, tc.subdir, tc.subdir, tc.module, p[tc.v+"_VERSION"], p[tc.v+"_COMMIT"], p[tc.v+"_SRC_SHA256"], tc.v)
		assert.True(t, ok, "%s: %s", tc.subdir, out)
	}
}
