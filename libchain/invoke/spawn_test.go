package invoke

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestChildWait runs /bin/sh as a delegate through spawn and wait: the
// exit status as os/exec says it, stdin fed while stdout is drained (more
// than a pipe holds, both ways), a delegate that never reads its stdin, an
// output held open past the exit, and a deadline that kills the group.
func TestChildWait(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // 256 KiB
	tests := []struct {
		name    string
		script  string
		stdin   []byte
		timeout time.Duration
		grace   time.Duration
		wantErr string // "" means success
		wantOut []byte
		wantCtx bool // ctx.Err() is set when wait returns
	}{
		{name: "success echoes stdin", script: "cat", stdin: []byte("hello"), wantOut: []byte("hello")},
		{name: "256 KiB in and out at once", script: "cat", stdin: big, wantOut: big},
		{name: "exit status", script: "exit 3", wantErr: "exit status 3"},
		{name: "never reads stdin", script: "echo done", stdin: big, wantOut: []byte("done\n")},
		{name: "killed by a signal", script: "kill -9 $$", wantErr: "signal: killed"},
		{name: "output held past the exit", script: "(sleep 5) & echo ok", grace: 200 * time.Millisecond,
			wantErr: exec.ErrWaitDelay.Error(), wantOut: []byte("ok\n")},
		{name: "deadline kills the group", script: "sleep 5 & sleep 5", timeout: 200 * time.Millisecond,
			wantErr: "signal: killed", wantCtx: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				t.Cleanup(cancel)
			}
			grace := tc.grace
			if grace == 0 {
				grace = 5 * time.Second
			}
			c, err := spawnScript(t, tc.script)
			require.NoError(t, err)
			t.Cleanup(c.close)
			start := time.Now()
			var out, errOut capWriter
			out.max, errOut.max = 1<<20, 1<<10
			err = c.wait(ctx, tc.stdin, &out, &errOut, grace)
			if tc.wantErr == "" {
				require.NoError(t, err, "stderr: %s", errOut.buf)
			} else {
				require.Error(t, err)
				assert.Equal(t, tc.wantErr, err.Error())
			}
			if tc.wantOut != nil {
				assert.True(t, bytes.Equal(tc.wantOut, out.buf), "stdout: %d bytes, want %d", len(out.buf), len(tc.wantOut))
			}
			assert.Equal(t, tc.wantCtx, ctx.Err() != nil)
			assert.Less(t, time.Since(start), 4*time.Second, "nothing waits for the sleeps")
		})
	}
}

// spawnScript spawns a shell script through spawn (which passes no
// arguments).
func spawnScript(t *testing.T, script string) (*child, error) {
	t.Helper()
	dir := t.TempDir()
	writeScript(t, dir, "delegate", script+"\n")
	return spawn(dir+"/delegate", []string{"PATH=/usr/bin:/bin"})
}

func TestExitErrorMatchesOSExec(t *testing.T) {
	for _, script := range []string{"exit 0", "exit 7", "kill -TERM $$", "kill -9 $$"} {
		err := exec.Command("/bin/sh", "-c", script).Run()
		c, serr := spawnScript(t, script)
		require.NoError(t, serr)
		var out, errOut capWriter
		out.max, errOut.max = 1<<10, 1<<10
		got := c.wait(context.Background(), nil, &out, &errOut, time.Second)
		c.close()
		if err == nil {
			assert.NoError(t, got, script)
			continue
		}
		require.Error(t, got, script)
		assert.Equal(t, err.Error(), got.Error(), script)
		assert.True(t, strings.HasPrefix(got.Error(), "exit status") || strings.HasPrefix(got.Error(), "signal:"))
	}
}

// TestChildWaitWithoutPidfd: on a kernel without CLONE_PIDFD the loop polls
// for the exit, and still reaps the delegate with its status and output.
func TestChildWaitWithoutPidfd(t *testing.T) {
	c, err := spawnScript(t, "sleep 0.05; echo late; exit 4")
	require.NoError(t, err)
	t.Cleanup(c.close)
	c.closeFd(&c.pidfd)
	var out, errOut capWriter
	out.max, errOut.max = 1<<10, 1<<10
	err = c.wait(context.Background(), nil, &out, &errOut, time.Second)
	require.Error(t, err)
	assert.Equal(t, "exit status 4", err.Error())
	assert.Equal(t, "late\n", string(out.buf))
}

// TestSpawnPassesOnlyStdio: a delegate gets its stdin, stdout and stderr
// and no other fd of catena's, also one that is not close-on-exec (as the
// retrier's lock was): a process the delegate leaves behind holds nothing
// of catena's.
func TestSpawnPassesOnlyStdio(t *testing.T) {
	leak, err := os.Create(filepath.Join(t.TempDir(), "catena-only"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = leak.Close() })
	_, err = unix.FcntlInt(leak.Fd(), unix.F_SETFD, 0)
	require.NoError(t, err)
	fd := int(leak.Fd())

	c, err := spawnScript(t, fmt.Sprintf(`for fd in 0 1 2 %d; do [ -e /proc/$$/fd/$fd ] && echo "$fd open" || echo "$fd closed"; done`, fd))
	require.NoError(t, err)
	t.Cleanup(c.close)
	var out, errOut capWriter
	out.max, errOut.max = 1<<10, 1<<10
	require.NoError(t, c.wait(context.Background(), nil, &out, &errOut, time.Second), "stderr: %s", errOut.buf)
	assert.Equal(t, fmt.Sprintf("0 open\n1 open\n2 open\n%d closed\n", fd), string(out.buf))
}
