package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAgentBadInput is §4 (6): `install --once` with no usable primary
// exits 1 with a message naming the problem, and writes nothing: not the
// conf dir, not the bin dir, not Catena's cache dir. These cases need no
// runtime: what matters is that the conf dir stays as it was.
func TestAgentBadInput(t *testing.T) {
	cases := []struct {
		name    string
		primary string // "" : no primary file at all
		want    string
	}{
		{"no primary", "", "no primary network config"},
		{"invalid primary", `{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"bridge"`,
			primaryName + ": not valid JSON (half-written?): unexpected end of JSON input; if its writer has finished, fix the file; nothing written"},
		{"plugin binary missing", `{"cniVersion":"0.3.1","name":"x","plugins":[{"type":"bridge"},{"type":"bandwidth"}]}`,
			primaryName + `: plugin 1, "bandwidth": plugin binary missing: no such file in `},
		{"plugin type with a slash", `{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"../bridge"}]}`, `"../bridge" must be a plain binary name`},
		{"already contains catena", `{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"bridge"},{"type":"catena","delegates":[{"type":"bridge"}]}]}`,
			"already contains catena"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := newAgentNode(t, nil)
			if c.primary != "" {
				n.writePrimary(c.primary)
			}
			confBefore, binBefore := listing(t, n.confDir), names(t, n.binDir)
			out, errOut, code := n.agent(n.args("install", "--once")...)
			assert.Equal(t, 1, code, "stdout: %s\nstderr: %s", out, errOut)
			assert.Contains(t, errOut, c.want)
			if c.name == "plugin binary missing" {
				assert.Contains(t, errOut, n.binDir+` (--cni-path); every ADD through it would fail. Install "bandwidth" there`)
			}
			assert.Equal(t, confBefore, listing(t, n.confDir), "nothing written to the conf dir")
			assert.Equal(t, binBefore, names(t, n.binDir), "nothing written to the bin dir")
			_, err := os.Stat(n.w.cacheDir)
			assert.ErrorIs(t, err, os.ErrNotExist, "nothing written to Catena's cache dir")
			t.Logf("bad input %q: exit %d, %q", c.name, code, lastLine(errOut))
		})
	}
}

// TestAgentTwoCandidates is §4 (6), two candidates: the lexically first is
// wrapped and pinned; a valid file that appears later and sorts earlier
// does not take over, and is logged.
func TestAgentTwoCandidates(t *testing.T) {
	n := newAgentNode(t, nil)
	conf := func(name string) []byte {
		return []byte(fmt.Sprintf(`{"cniVersion":"1.0.0","name":%q,"plugins":[{"type":"bridge","bridge":%q}]}`, name, n.w.bridge))
	}
	writeAtomic(t, filepath.Join(n.confDir, "10-a.conflist"), conf("net-a"))
	writeAtomic(t, filepath.Join(n.confDir, "20-b.conflist"), conf("net-b"))
	out, errOut, code := n.agent(n.args("install", "--once")...)
	require.Zero(t, code, "%s%s", out, errOut)
	assert.Contains(t, out, "wrapping 10-a.conflist")
	gen, err := os.ReadFile(filepath.Join(n.confDir, generatedName))
	require.NoError(t, err)
	assert.Contains(t, string(gen), `"name": "net-a"`)
	assert.Contains(t, string(gen), `"source": "10-a.conflist"`)

	writeAtomic(t, filepath.Join(n.confDir, "05-early.conflist"), conf("net-early"))
	out, errOut, code = n.agent(n.args("install", "--once")...)
	require.Zero(t, code, "%s%s", out, errOut)
	assert.Contains(t, out, "wrapping 10-a.conflist", "the pinned primary stays")
	assert.Contains(t, errOut, "05-early.conflist", "the earlier-sorting file is logged")
	again, err := os.ReadFile(filepath.Join(n.confDir, generatedName))
	require.NoError(t, err)
	assert.Equal(t, gen, again)
	t.Logf("two candidates: wrapped 10-a.conflist of [10-a, 20-b]; after 05-early.conflist appeared, still 10-a, logged: %q", lastLine(errOut))
}

// names lists a dir's entries.
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
