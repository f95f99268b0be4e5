//go:build linux

package invoke

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/catena-cni/catena/internal/proctest"
)

// TestPollErrorKillsAndReapsDelegate: a ppoll that fails with anything but
// EINTR ends wait with that error, wrapped, as the deadline does: the
// delegate and what it started in its process group are killed, and the
// delegate is reaped, not left a child of the caller. (Before, wait
// returned at once and the delegate ran on, unreaped.)
func TestPollErrorKillsAndReapsDelegate(t *testing.T) {
	for _, errno := range []unix.Errno{unix.EBADF, unix.ENOMEM} {
		t.Run(errno.Error(), func(t *testing.T) {
			dir := t.TempDir()
			writeScript(t, dir, "delegate", `sleep 60 & echo $! > "${0%/*}/pid.tmp"; mv "${0%/*}/pid.tmp" "${0%/*}/pid"; exec sleep 60`+"\n")
			c, err := spawn(dir+"/delegate", []string{"PATH=/usr/bin:/bin"})
			require.NoError(t, err)
			t.Cleanup(c.close)
			pid := c.pid
			t.Cleanup(func() { killUnreaped(t, pid) })
			pidFile := filepath.Join(dir, "pid")
			require.Eventually(t, func() bool { _, err := os.Stat(pidFile); return err == nil }, 10*time.Second, 10*time.Millisecond, "the delegate started its background child")
			member := readPid(t, pidFile)
			t.Cleanup(func() { _ = unix.Kill(member, unix.SIGKILL) })

			polls := 0
			c.poll = func([]unix.PollFd, int) (int, error) {
				polls++
				return 0, errno
			}
			var out, errOut capWriter
			out.max, errOut.max = 1<<10, 1<<10
			start := time.Now()
			err = c.wait(context.Background(), nil, &out, &errOut, time.Second)
			require.Error(t, err)
			assert.ErrorIs(t, err, errno)
			assert.Contains(t, err.Error(), "ppoll")
			assert.Equal(t, 1, polls, "no poll after the failed one")
			assert.Less(t, time.Since(start), 5*time.Second)
			assert.False(t, isChild(pid), "the delegate is reaped")
			assert.True(t, proctest.Gone(t, pid), "the delegate is dead")
			assert.Eventually(t, func() bool { return proctest.Gone(t, member) }, 5*time.Second, 10*time.Millisecond,
				"what the delegate started in its group is killed")
		})
	}
}

// TestProcExecPollError: through ProcExec, a failed ppoll fails the call
// naming the delegate, with the errno, its outcome unknown, and leaves no
// child behind.
func TestProcExecPollError(t *testing.T) {
	dir := t.TempDir()
	writeScript(t, dir, "delegate", "exec sleep 60\n")
	e := &ProcExec{poll: func([]unix.PollFd, int) (int, error) { return 0, unix.ENOMEM }}
	_, err := e.ExecPlugin(context.Background(), dir+"/delegate", nil, []string{"PATH=/usr/bin:/bin"})
	require.Error(t, err)
	assert.ErrorIs(t, err, unix.ENOMEM)
	assert.Contains(t, err.Error(), dir+"/delegate was killed, its outcome unknown: waiting for pid")
	assert.Contains(t, err.Error(), "(it was killed and reaped)")
	var pid int
	_, serr := fmt.Sscanf(err.Error()[strings.Index(err.Error(), "waiting for pid "):], "waiting for pid %d:", &pid)
	require.NoError(t, serr, err.Error())
	assert.False(t, isChild(pid), "the delegate is reaped")
}
