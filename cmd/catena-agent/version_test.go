package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"

	"github.com/catena-cni/catena/internal/clitest"
	"github.com/catena-cni/catena/libchain/release"
)

// TestVersionFlag: --version (and -v) print catena-agent's name, Catena's
// version and the commit on stdout, one line, exit 0; the environment's
// CATENA_AGENT_* flags change nothing.
func TestVersionFlag(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-v"}} {
		t.Run(args[0], func(t *testing.T) {
			var out, errOut bytes.Buffer
			getenv := func(k string) string {
				if k == "CATENA_AGENT_LOG_LEVEL" {
					return "nonsense"
				}
				return ""
			}
			code := runContext(context.Background(), args, env{stdout: &out, stderr: &errOut, fs: afero.NewMemMapFs(), getenv: getenv, selfDir: "/nonexistent"})
			assert.Equal(t, 0, code, errOut.String())
			assert.Empty(t, errOut.String())
			assert.Regexp(t, clitest.VersionLine("catena-agent"), strings.TrimSuffix(out.String(), "\n"))
			assert.True(t, strings.HasPrefix(out.String(), "catena-agent "+release.Version+" (commit "), out.String())
			assert.Equal(t, 1, strings.Count(out.String(), "\n"), "one line")
		})
	}
}

// TestVersionWriteErrorFails: --version whose line cannot be written fails,
// exit 1, the error on stderr.
func TestVersionWriteErrorFails(t *testing.T) {
	out := &clitest.FailWriter{On: release.Version}
	var errOut bytes.Buffer
	code := runContext(context.Background(), []string{"--version"}, env{stdout: out, stderr: &errOut, fs: afero.NewMemMapFs(), selfDir: "/nonexistent"})
	assert.Equal(t, 1, code, "stderr: %s", errOut.String())
	assert.Contains(t, errOut.String(), "catena-agent: "+clitest.ErrWrite.Error())
}
