package proctest

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStatAndGone: a running child's parent is this process, and it is not
// gone; once it has exited (a zombie until reaped) and once reaped, it is.
func TestStatAndGone(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid

	state, ppid, err := Stat(pid)
	require.NoError(t, err)
	assert.Equal(t, os.Getpid(), ppid)
	assert.False(t, Dead(state), state)
	assert.False(t, Gone(t, pid))

	require.NoError(t, cmd.Process.Kill())
	assert.Eventually(t, func() bool { return Gone(t, pid) }, 5*time.Second, time.Millisecond, "a zombie")
	_ = cmd.Wait()
	assert.True(t, Gone(t, pid), "reaped")
	_, _, err = Stat(pid)
	assert.ErrorIs(t, err, os.ErrNotExist)
}
