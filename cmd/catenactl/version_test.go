package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/catena-cni/catena/internal/clitest"
	"github.com/catena-cni/catena/libchain/release"
)

// TestVersionFlag: --version (and -v) print catenactl's name, Catena's
// version and the commit on stdout, one line, exit 0, with or without a
// config on the node.
func TestVersionFlag(t *testing.T) {
	f := newFixture(t)
	for _, args := range [][]string{{"--version"}, {"-v"}, {"--json", "--version"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out, stderr, code := f.runRaw(args...)
			assert.Equal(t, 0, code, stderr)
			assert.Empty(t, stderr)
			assert.Regexp(t, clitest.VersionLine("catenactl"), strings.TrimSuffix(out, "\n"))
			assert.True(t, strings.HasPrefix(out, "catenactl "+release.Version+" (commit "), out)
			assert.Equal(t, 1, strings.Count(out, "\n"), "one line")
		})
	}
}

// TestVersionWriteErrorFails: --version whose line cannot be written fails,
// exit 1, the error on stderr.
func TestVersionWriteErrorFails(t *testing.T) {
	out := &clitest.FailWriter{On: release.Version}
	var errOut bytes.Buffer
	code := run([]string{"--version"}, env{
		stdout: out, stderr: &errOut,
		getenv:   func(string) string { return "" },
		now:      time.Now,
		netDir:   t.TempDir(),
		ownerUID: os.Geteuid(),
	})
	assert.Equal(t, 1, code, "stderr: %s", errOut.String())
	assert.Contains(t, errOut.String(), "catenactl: "+clitest.ErrWrite.Error())
}
