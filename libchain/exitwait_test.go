package libchain

import (
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAwaitExit: awaitExit returns once the child has exited, not before,
// and leaves it for Wait to reap with its real status.
func TestAwaitExit(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		status int
	}{
		{"exits 0 after 200ms", []string{"-c", "sleep 0.2"}, 0},
		{"exits 3 at once", []string{"-c", "exit 3"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := exec.Command("/bin/sh", tt.args...)
			require.NoError(t, c.Start())
			t.Cleanup(func() { _ = c.Process.Kill() })
			t0 := time.Now()
			require.NoError(t, awaitExit(c.Process.Pid))
			if tt.status == 0 {
				assert.GreaterOrEqual(t, time.Since(t0), 150*time.Millisecond, "returned before the child exited")
			}
			err := c.Wait()
			assert.Equal(t, tt.status, c.ProcessState.ExitCode(), "Wait reaps the child itself: %v", err)
		})
	}
	t.Run("no such process", func(t *testing.T) {
		c := exec.Command("/bin/true")
		require.NoError(t, c.Run())
		require.Error(t, awaitExit(c.Process.Pid), "a reaped child has no pidfd")
	})
}

// TestAwaitExitNeverLosesAnExit: children that exit at once, many times:
// an exit between the pidfd's registration in the poller and the wait must
// still end the wait (it did not, and a delegate's call hung for good).
func TestAwaitExitNeverLosesAnExit(t *testing.T) {
	for i := range 300 {
		c := exec.Command("/bin/true")
		require.NoError(t, c.Start())
		done := make(chan error, 1)
		go func() { done <- awaitExit(c.Process.Pid) }()
		select {
		case err := <-done:
			require.NoError(t, err, "child %d", i)
		case <-time.After(5 * time.Second):
			_ = c.Process.Kill()
			t.Fatalf("child %d: its exit was lost, awaitExit still waits after 5s", i)
		}
		require.NoError(t, c.Wait())
	}
}
