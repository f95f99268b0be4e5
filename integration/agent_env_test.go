package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAgentReadsEnvironment: the real catena-agent binary takes its flags
// from CATENA_AGENT_* variables (what deploy/catena.yaml's ConfigMap sets):
// a bad value of each is a usage error (exit 2) naming the variable. An
// agent that ignored it would run on (killed after 10 s).
func TestAgentReadsEnvironment(t *testing.T) {
	n := newAgentNode(t, nil)
	for _, tc := range []struct{ sub, variable string }{
		{"install", "CATENA_AGENT_SLOW_THRESHOLD"},
		{"run", "CATENA_AGENT_RECONCILE_INTERVAL"},
		{"run", "CATENA_AGENT_GRACE"},
		{"run", "CATENA_AGENT_ABANDON_AFTER"},
	} {
		t.Run(tc.variable, func(t *testing.T) {
			args := n.args(tc.sub, "--once")
			if tc.sub == "run" {
				args = n.args(tc.sub, "--listen-addr", "127.0.0.1:0", "--reconcile-interval", "0s")
				if tc.variable == "CATENA_AGENT_RECONCILE_INTERVAL" {
					args = args[:len(args)-2]
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(n.src, "catena-agent"), args...)
			cmd.Env = append(os.Environ(), tc.variable+"=soon")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			require.NoError(t, cmd.Start())
			_ = cmd.Wait()
			assert.Equal(t, 2, cmd.ProcessState.ExitCode(), "the bad %s is a usage error: %s", tc.variable, stderr.String())
			assert.Contains(t, stderr.String(), tc.variable+`="soon"`)
		})
	}
}
