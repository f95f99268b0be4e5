package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain/release"
)

// buildCatena builds this main into a temp dir.
func buildCatena(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "catena")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

type cniOut struct {
	Code uint   `json:"code"`
	Msg  string `json:"msg"`
}

// TestBadInput: every bad input gets a CNI error with the spec's code, a
// message naming the field, a non-zero exit, and no change on disk.
func TestBadInput(t *testing.T) {
	bin := buildCatena(t)
	good := func(cacheDir, delegates string) string {
		return fmt.Sprintf(`{"cniVersion":"1.0.0","name":"podnet","type":"catena","cacheDir":%q,"delegates":%s}`, cacheDir, delegates)
	}
	tests := []struct {
		name     string
		conf     func(cacheDir string) string
		env      map[string]string // overrides of the valid ADD env
		wantCode uint
		wantMsg  string
	}{
		{"malformed JSON", func(string) string { return `{"cniVersion":"1.0.0","name":` }, nil, 6, "unmarshal"},
		{"no delegates", func(d string) string { return good(d, `[]`) }, nil, 7, "delegates"},
		{"delegate without type", func(d string) string { return good(d, `[{"bridge":"x"}]`) }, nil, 7, "delegates[0].type"},
		{"delegate type with slash", func(d string) string { return good(d, `[{"type":"/bin/true"}]`) }, nil, 7, "delegates[0].type"},
		{"network name escapes", func(d string) string {
			return strings.Replace(good(d, `[{"type":"bridge"}]`), `"podnet"`, `"../../etc"`, 1)
		}, nil, 7, "network name"},
		{"container ID escapes", func(d string) string { return good(d, `[{"type":"bridge"}]`) },
			map[string]string{"CNI_CONTAINERID": "../../x"}, 4, "containerID"},
		{"ifname escapes", func(d string) string { return good(d, `[{"type":"bridge"}]`) },
			map[string]string{"CNI_IFNAME": "../x"}, 4, "interface name"},
		{"missing CNI_CONTAINERID", func(d string) string { return good(d, `[{"type":"bridge"}]`) },
			map[string]string{"CNI_CONTAINERID": ""}, 4, "CNI_CONTAINERID"},
		{"missing CNI_PATH", func(d string) string { return good(d, `[{"type":"bridge"}]`) },
			map[string]string{"CNI_PATH": ""}, 4, "CNI_PATH"},
		{"bad lockTimeout", func(d string) string {
			return strings.Replace(good(d, `[{"type":"bridge"}]`), `"type":"catena"`, `"type":"catena","lockTimeout":"never"`, 1)
		}, nil, 7, "lockTimeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cacheDir := filepath.Join(t.TempDir(), "cache")
			env := map[string]string{
				"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c1", "CNI_NETNS": "/proc/self/ns/net",
				"CNI_IFNAME": "eth0", "CNI_PATH": t.TempDir(),
			}
			for k, v := range tt.env {
				env[k] = v
			}
			inv := runCatena(t, bin, env, tt.conf(cacheDir))
			var exitErr *exec.ExitError
			require.ErrorAs(t, inv.err, &exitErr, "non-zero exit")
			var out cniOut
			require.NoError(t, json.Unmarshal(inv.stdout, &out), "stdout is a CNI error: %q", inv.stdout)
			assert.Equal(t, tt.wantCode, out.Code, out.Msg)
			assert.Contains(t, out.Msg, tt.wantMsg)
			_, statErr := os.Stat(cacheDir)
			assert.True(t, os.IsNotExist(statErr), "no change on disk")
		})
	}
}

func TestVersionReportsEveryVersion(t *testing.T) {
	bin := buildCatena(t)
	cmd := exec.Command(bin)
	cmd.Env = []string{"CNI_COMMAND=VERSION"}
	out, err := cmd.Output()
	require.NoError(t, err)
	var v struct {
		Supported []string `json:"supportedVersions"`
	}
	require.NoError(t, json.Unmarshal(out, &v))
	for _, want := range []string{"0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		assert.Contains(t, v.Supported, want)
	}
}

// TestAboutNamesVersion: catena run by hand, with no CNI_COMMAND, prints on
// stderr its version and commit and what it is, and exits 0; VERSION's
// answer stays the spec's JSON (TestVersionReportsEveryVersion).
func TestAboutNamesVersion(t *testing.T) {
	bin := buildCatena(t)
	inv := runCatena(t, bin, nil, "")
	require.NoError(t, inv.err, "stderr: %s", inv.stderr)
	assert.Empty(t, inv.stdout)
	first, _, _ := strings.Cut(string(inv.stderr), "\n")
	assert.Regexp(t, `^catena `+regexp.QuoteMeta(release.Version)+` \(commit ([0-9a-f]{12}(, modified)?|unknown)\): a chained CNI meta-plugin`, first)
}
