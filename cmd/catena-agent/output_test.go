package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"

	"github.com/catena-cni/catena/internal/clitest"
)

// TestOutputWriteErrorFails: install --once and uninstall fail, exit 1,
// saying so, when what they report cannot be written to stdout (a full
// disk, a closed pipe): they do not exit 0 having said nothing.
func TestOutputWriteErrorFails(t *testing.T) {
	tests := []struct {
		name   string
		failOn string
		args   func(n node) []string
	}{
		{"install --once", "wrapping", func(n node) []string { return append([]string{"install", "--once"}, n.installArgs()...) }},
		{"uninstall: what it removed", "removed", func(n node) []string {
			return []string{"uninstall", "--cni-conf-dir", n.conf, "--cni-bin-dir", n.bin, "--cache-dir", n.cache}
		}},
		{"uninstall: the records left", "still have a record", func(n node) []string {
			return []string{"uninstall", "--cni-conf-dir", n.conf, "--cni-bin-dir", n.bin, "--cache-dir", n.cache}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, map[string]string{"10-bridge.conflist": primaryCL})
			if tc.args(n)[0] == "uninstall" {
				code, _, stderr := runAgent(t, append([]string{"install", "--once"}, n.installArgs()...)...)
				assert.Equal(t, 0, code, stderr)
			}
			out := &clitest.FailWriter{On: tc.failOn}
			var errOut bytes.Buffer
			code := runContext(context.Background(), tc.args(n), env{stdout: out, stderr: &errOut, fs: afero.NewOsFs(), selfDir: "/nonexistent"})
			assert.Equal(t, 1, code, "stdout so far:\n%s\nstderr:\n%s", out.Written.String(), errOut.String())
			assert.Contains(t, errOut.String(), "writing output: "+clitest.ErrWrite.Error())
		})
	}
}
