//go:build linux

package invoke

import (
	"github.com/catena-cni/catena/internal/proctest"

	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// leaver is a delegate that leaves its process group for its caller's
// (setpgid, in the same session), writes its pid beside itself, and
// sleeps 15 s with its stdout open: killing its group misses it.
const leaver = `#!/usr/bin/perl
setpgrp(0, getpgrp(getppid())) or die "setpgrp: $!";
my $d = $0; $d =~ s{/[^/]*$}{};
open(my $f, ">", "$d/pid.tmp") or die "pid: $!"; print $f "$$\n"; close($f);
rename("$d/pid.tmp", "$d/pid") or die "pid: $!";
sleep 15;
`

// TestDeadlineKillsDelegateThatLeftItsGroup: at the deadline the delegate
// itself is killed, not only its process group: the call returns at once,
// and the delegate is gone. (Killing only the group, the call lasted until
// the delegate exited by itself.)
func TestDeadlineKillsDelegateThatLeftItsGroup(t *testing.T) {
	if _, err := os.Stat("/usr/bin/perl"); err != nil {
		t.Skip("needs /usr/bin/perl to call setpgid")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "leaver")
	require.NoError(t, os.WriteFile(path, []byte(leaver), 0o755)) //nolint:gosec // an executable test script
	pidFile := filepath.Join(dir, "pid")

	// 2 s: perl starts and leaves its group well before, on a loaded machine
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cpu0, start := cpuTime(t), time.Now()
	_, err := (&ProcExec{}).ExecPlugin(ctx, path, nil, nil)
	took, cpu := time.Since(start), cpuTime(t)-cpu0
	t.Logf("ExecPlugin: %v wall, %v CPU of the whole test process", took.Round(time.Millisecond), cpu.Round(time.Millisecond))

	pid := readPid(t, pidFile)
	t.Cleanup(func() { killUnreaped(t, pid) })
	require.Error(t, err)
	assert.Contains(t, err.Error(), path+" was killed")
	assert.ErrorIs(t, err, context.DeadlineExceeded, "a killed delegate's outcome is unknown")
	assert.Less(t, took, 5*time.Second, "killed at the 2s deadline, not waited for until it exits (15s)")
	assert.Less(t, cpu, 200*time.Millisecond, "no busy wait")
	assert.True(t, proctest.Gone(t, pid), "the delegate is dead")
}

// TestDeadlineKillsDelegateThatLeftItsGroupWithoutPidfd: on a kernel
// without CLONE_PIDFD, the delegate is killed by its pid.
func TestDeadlineKillsDelegateThatLeftItsGroupWithoutPidfd(t *testing.T) {
	if _, err := os.Stat("/usr/bin/perl"); err != nil {
		t.Skip("needs /usr/bin/perl to call setpgid")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "leaver")
	require.NoError(t, os.WriteFile(path, []byte(leaver), 0o755)) //nolint:gosec // an executable test script
	c, err := spawn(path, nil)
	require.NoError(t, err)
	t.Cleanup(c.close)
	pid := c.pid
	t.Cleanup(func() { killUnreaped(t, pid) })
	c.closeFd(&c.pidfd)
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(dir, "pid")); return err == nil },
		10*time.Second, 10*time.Millisecond, "the delegate started and left its group")

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var out, errOut capWriter
	out.max, errOut.max = 1<<10, 1<<10
	start := time.Now()
	err = c.wait(ctx, nil, &out, &errOut, 5*time.Second)
	require.Error(t, err)
	assert.Equal(t, "signal: killed", err.Error())
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Equal(t, pid, readPid(t, filepath.Join(dir, "pid")), "it ran, and left its group")
	assert.False(t, isChild(pid), "killed and reaped")
}

// TestKilledDelegateNotExitingIsGivenUp: a delegate that does not die of
// its SIGKILL (here, frozen in a cgroup v1 freezer; in life, stuck in the
// kernel) is given up grace after the kill: wait returns an error, without
// spinning meanwhile, and the process is reaped by a later call once it
// has died. (Before, wait spun on a 0 ms ppoll until the process exited.)
func TestKilledDelegateNotExitingIsGivenUp(t *testing.T) {
	cg := newFreezer(t)
	c, err := spawnScript(t, "exec sleep 60")
	require.NoError(t, err)
	t.Cleanup(c.close)
	pid := c.pid
	cg.freeze(t, pid)
	// The old wait spins until the process exits: thaw it (it then dies of
	// its pending SIGKILL) so that a failing run ends.
	thaw := time.AfterFunc(5*time.Second, func() { _ = cg.thaw() })
	t.Cleanup(func() { thaw.Stop() })

	const timeout, grace = 200 * time.Millisecond, time.Second
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out, errOut capWriter
	out.max, errOut.max = 1<<10, 1<<10
	cpu0, start := cpuTime(t), time.Now()
	err = c.wait(ctx, nil, &out, &errOut, grace)
	took, cpu := time.Since(start), cpuTime(t)-cpu0
	t.Logf("wait: %v wall, %v CPU of the whole test process", took.Round(time.Millisecond), cpu.Round(time.Millisecond))

	require.Error(t, err)
	var u *unreapedError
	require.ErrorAs(t, err, &u, "given up, not reaped: %v", err)
	assert.Equal(t, pid, u.pid)
	assert.Contains(t, err.Error(), fmt.Sprintf("pid %d has not exited 1s after its SIGKILL", pid))
	assert.Less(t, took, timeout+grace+time.Second, "bounded: the deadline, then grace")
	assert.Less(t, cpu, 200*time.Millisecond, "no busy wait (a spin burns about as much CPU as wall time)")
	assert.False(t, proctest.Gone(t, pid), "still frozen")

	require.NoError(t, cg.thaw())
	assert.True(t, awaitNotChild(t, pid), "once dead, a later call reaps it")
}

// TestProcExecGivesUpFrozenDelegate: through ProcExec, a delegate that
// outlives its SIGKILL by more than outputGrace fails the call naming the
// delegate, as a timeout (outcome unknown), outputGrace after the deadline.
func TestProcExecGivesUpFrozenDelegate(t *testing.T) {
	cg := newFreezer(t)
	dir := t.TempDir()
	writeScript(t, dir, "frozen", fmt.Sprintf(`echo $$ >%q/pid.tmp && mv %q/pid.tmp %q/pid
echo $$ >%q/cgroup.procs
echo FROZEN >%q/freezer.state
sleep 60
`, dir, dir, dir, cg.dir, cg.dir))
	path := filepath.Join(dir, "frozen")
	thaw := time.AfterFunc(outputGrace+6*time.Second, func() { _ = cg.thaw() })
	t.Cleanup(func() { thaw.Stop() })

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	cpu0, start := cpuTime(t), time.Now()
	_, err := (&ProcExec{}).ExecPlugin(ctx, path, nil, nil)
	took, cpu := time.Since(start), cpuTime(t)-cpu0
	t.Logf("ExecPlugin: %v wall, %v CPU of the whole test process", took.Round(time.Millisecond), cpu.Round(time.Millisecond))

	pid := readPid(t, filepath.Join(dir, "pid"))
	cg.own(pid)
	require.Error(t, err)
	assert.Contains(t, err.Error(), path+" was killed, but pid "+strconv.Itoa(pid)+" has not exited 10s after its SIGKILL")
	assert.Contains(t, err.Error(), "its outcome is unknown")
	t.Log(err)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "read as a timeout")
	assert.Less(t, took, time.Second+outputGrace+2*time.Second)
	assert.Less(t, cpu, 300*time.Millisecond, "no busy wait")

	require.NoError(t, cg.thaw())
	assert.True(t, awaitNotChild(t, pid), "once dead, a later call reaps it")
}

// freezer is a cgroup v1 freezer group of one test, and the processes the
// test started into it.
type freezer struct {
	dir  string
	pids []int
}

// newFreezer creates a freezer cgroup; Cleanup thaws it, kills and reaps
// the processes it was given (those not reaped yet), and removes it.
func newFreezer(t *testing.T) *freezer {
	t.Helper()
	const root = "/sys/fs/cgroup/freezer"
	if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and a cgroup v1 freezer at " + root)
	}
	f := &freezer{dir: filepath.Join(root, fmt.Sprintf("catena-test-%d-%d", os.Getpid(), time.Now().UnixNano()))}
	require.NoError(t, os.Mkdir(f.dir, 0o755))
	t.Cleanup(func() {
		assert.NoError(t, f.thaw())
		for _, pid := range f.pids {
			killUnreaped(t, pid)
		}
		assert.Eventually(t, func() bool { return syscall.Rmdir(f.dir) == nil }, 5*time.Second, 20*time.Millisecond, "removing %s", f.dir)
	})
	return f
}

// own makes pid the freezer's to kill and reap at Cleanup.
func (f *freezer) own(pid int) { f.pids = append(f.pids, pid) }

func (f *freezer) set(t *testing.T, file, value string) {
	t.Helper()
	fd, err := os.OpenFile(filepath.Join(f.dir, file), os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fd.WriteString(value)
	require.NoError(t, errors.Join(err, fd.Close()))
}

// freeze moves pid into the group, owned, and freezes it.
func (f *freezer) freeze(t *testing.T, pid int) {
	t.Helper()
	f.own(pid)
	f.set(t, "cgroup.procs", strconv.Itoa(pid))
	f.set(t, "freezer.state", "FROZEN")
	require.Eventually(t, func() bool {
		data, err := os.ReadFile(filepath.Join(f.dir, "freezer.state"))
		return err == nil && strings.TrimSpace(string(data)) == "FROZEN"
	}, 5*time.Second, 5*time.Millisecond)
}

func (f *freezer) thaw() error {
	fd, err := os.OpenFile(filepath.Join(f.dir, "freezer.state"), os.O_WRONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err == nil {
		_, err = fd.WriteString("THAWED")
		err = errors.Join(err, fd.Close())
	}
	return err
}

// cpuTime is the CPU time (user and system) this process used so far.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru unix.Rusage
	require.NoError(t, unix.Getrusage(unix.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func readPid(t *testing.T, file string) int {
	t.Helper()
	data, err := os.ReadFile(file) //nolint:gosec // a test's temp file
	require.NoError(t, err, "the delegate never started")
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err)
	require.Greater(t, pid, 1)
	return pid
}

// isChild reports whether pid is a child of this process not yet reaped
// (running or a zombie). It reaps nothing.
func isChild(pid int) bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return !errors.Is(err, unix.ECHILD)
}

// awaitNotChild reaps the delegates given up on until pid is no longer a
// child of this process (at most 5 s).
func awaitNotChild(t *testing.T, pid int) bool {
	t.Helper()
	return assert.Eventually(t, func() bool {
		reapAbandoned()
		return !isChild(pid)
	}, 5*time.Second, 10*time.Millisecond)
}

// killUnreaped kills and reaps pid if it is still an unreaped child of this
// process (so the pid cannot be another process's): through the delegates
// given up on if it is one, else directly.
func killUnreaped(t *testing.T, pid int) {
	t.Helper()
	if !isChild(pid) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	var ws syscall.WaitStatus
	assert.Eventually(t, func() bool {
		reapAbandoned()
		if isChild(pid) && proctest.Gone(t, pid) { // a zombie no one else reaps
			_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		}
		return !isChild(pid)
	}, 5*time.Second, 10*time.Millisecond, "reaping %d", pid)
}
