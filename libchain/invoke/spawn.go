package invoke

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A delegate's process, started and waited for without os/exec: one
// clone (vfork, with a pidfd), three pipes, and one loop in the calling
// goroutine that feeds stdin, drains stdout and stderr and watches the
// pidfd with ppoll. Catena is a process of one P that lives for one call;
// with os/exec each delegate cost four goroutines (stdin, stdout, stderr,
// the context's watcher), and each blocking system call of theirs, with
// the others runnable, made the scheduler hand the P to another thread.
// Here nothing else is runnable while ppoll blocks: the runtime's monitor
// takes the idle P back and sleeps until the call returns. (A raw ppoll,
// invisible to the scheduler, was measured worse: the monitor then sees a
// running P and wakes every 20 µs to 10 ms for as long as it runs.) The
// pipe reads and writes never block, and are raw system calls.
//
// When ctx ends, the delegate (through its pidfd) and its process group are
// sent SIGKILL; from then on, the call lasts at most the output grace: the
// delegate's output is read until then, and a delegate still not exited at
// its end (stuck in the kernel, or in a frozen cgroup) is given up: wait
// returns an unreapedError at once, and the process is left to be reaped
// when it dies. Nothing waits for it: in catena, which exits soon after,
// it is reparented (to init, or a subreaper) and reaped there; in a
// long-lived caller (catena-agent), each later spawn reaps, without
// blocking, those of the given-up delegates that have died since. No
// goroutine and no thread is kept for them, and no loop spins.

// child is a started delegate; the fds are the parent's ends of its stdio
// (nonblocking), -1 once closed.
type child struct {
	pid, pidfd            int
	stdin, stdout, stderr int
	// poll is the ppoll wait makes; nil means rawPoll. A test makes it fail.
	poll func(fds []unix.PollFd, timeoutMs int) (int, error)
}

// exitError is a delegate's exit status as os/exec's ExitError says it.
type exitError struct{ status syscall.WaitStatus }

func (e *exitError) Error() string {
	var s string
	switch {
	case e.status.Exited():
		s = "exit status " + strconv.Itoa(e.status.ExitStatus())
	case e.status.Signaled():
		s = "signal: " + e.status.Signal().String()
	default:
		s = "wait status " + strconv.Itoa(int(e.status))
	}
	if e.status.CoreDump() {
		s += " (core dumped)"
	}
	return s
}

// ExitCode is the delegate's exit code, or -1 if a signal ended it.
func (e *exitError) ExitCode() int { return e.status.ExitStatus() }

// unreapedError says that a killed delegate had not exited grace after its
// SIGKILL, and was given up.
type unreapedError struct {
	pid   int
	grace time.Duration
}

func (e *unreapedError) Error() string {
	return "pid " + strconv.Itoa(e.pid) + " has not exited " + e.grace.String() +
		" after its SIGKILL (stuck in the kernel, or in a frozen cgroup)"
}

// abandoned is the pids of the delegates given up on while alive: still
// children of this process, unreaped, so that their pids are not reused.
// Nothing else in a Catena process reaps a delegate.
var abandoned struct {
	sync.Mutex
	pids []int
}

// abandon leaves the child to reapAbandoned; what the parent holds of it is
// released.
func (c *child) abandon() {
	abandoned.Lock()
	abandoned.pids = append(abandoned.pids, c.pid)
	abandoned.Unlock()
	c.close()
}

// reapAbandoned reaps, without blocking, the given-up delegates that have
// exited since, and returns their pids.
func reapAbandoned() []int {
	abandoned.Lock()
	defer abandoned.Unlock()
	var reaped []int
	kept := abandoned.pids[:0]
	for _, pid := range abandoned.pids {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		switch {
		case err == nil && got == 0, err == syscall.EINTR:
			kept = append(kept, pid) // still running (or ask again next time)
		case err == nil:
			reaped = append(reaped, pid)
		}
		// Any other error (ECHILD): not a child of ours; nothing to reap.
	}
	abandoned.pids = kept
	return reaped
}

// spawn starts the binary at path (argv[0] is path, as os/exec does) with
// env, in its own process group, with SIGKILL as its parent-death signal.
// The delegate gets its stdin, stdout and stderr and nothing else: every
// other fd of this process is close-on-exec first (one close_range, Linux
// 5.11; an fd opened without O_CLOEXEC, or inherited, would otherwise
// reach the delegate and whatever it leaves running).
func spawn(path string, env []string) (*child, error) {
	reapAbandoned()
	_ = unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	in, out, errp := [2]int{-1, -1}, [2]int{-1, -1}, [2]int{-1, -1}
	for _, p := range []*[2]int{&in, &out, &errp} {
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			closeFds(in[:], out[:], errp[:])
			return nil, os.NewSyscallError("pipe2", err)
		}
	}
	pidfd := -1
	attr := &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{uintptr(in[0]), uintptr(out[1]), uintptr(errp[1])},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, PidFD: &pidfd},
	}
	pid, err := syscall.ForkExec(path, []string{path}, attr)
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSYS) {
		// A kernel without CLONE_PIDFD (before 5.2): wait polls instead.
		pidfd, attr.Sys.PidFD = -1, nil
		pid, err = syscall.ForkExec(path, []string{path}, attr)
	}
	closeFds(in[:1], out[1:], errp[1:])
	if err != nil {
		closeFds(in[1:], out[:1], errp[:1])
		return nil, &os.PathError{Op: "fork/exec", Path: path, Err: err}
	}
	c := &child{pid: pid, pidfd: pidfd, stdin: in[1], stdout: out[0], stderr: errp[0]}
	for _, fd := range []int{c.stdin, c.stdout, c.stderr} {
		// Only the parent's ends: the delegate's stdio stays blocking.
		_, _, _ = unix.RawSyscall(unix.SYS_FCNTL, uintptr(fd), unix.F_SETFL, unix.O_NONBLOCK)
	}
	return c, nil
}

func closeFds(sets ...[]int) {
	for _, fds := range sets {
		for _, fd := range fds {
			if fd >= 0 {
				_ = unix.Close(fd)
			}
		}
	}
}

func (c *child) closeFd(fd *int) {
	if *fd >= 0 {
		_ = unix.Close(*fd)
		*fd = -1
	}
}

// close releases what the parent holds of the child (reaped or not).
func (c *child) close() {
	c.closeFd(&c.stdin)
	c.closeFd(&c.stdout)
	c.closeFd(&c.stderr)
	c.closeFd(&c.pidfd)
}

// wait writes stdin to the delegate (it may exit without reading it all),
// copies its stdout and stderr until they close, reaps it, and returns
// nil, its exit status as an error, or exec.ErrWaitDelay if it exited with
// success but its output stayed open grace past its exit. When ctx ends,
// the delegate and its whole process group are killed; the output is still
// drained for at most grace, and a delegate that has not exited grace after
// the kill is given up (abandon): wait returns an *unreapedError.
func (c *child) wait(ctx context.Context, stdin []byte, stdout, stderr io.Writer, grace time.Duration) error {
	if len(stdin) == 0 {
		c.closeFd(&c.stdin)
	}
	buf := make([]byte, 32<<10)
	var exited, killed, cut bool
	var graceEnd time.Time
	for !exited || c.stdout >= 0 || c.stderr >= 0 {
		now := time.Now()
		// The context's own timer may not have fired: this goroutine
		// holds the only P through ppoll, so the deadline is checked here.
		dl, hasDL := ctx.Deadline()
		if !killed && (ctx.Err() != nil || hasDL && !now.Before(dl)) {
			c.kill()
			killed = true
			settle(ctx)
			if graceEnd.IsZero() {
				graceEnd = now.Add(grace)
			}
		}
		if !graceEnd.IsZero() && !now.Before(graceEnd) {
			if !exited && !c.hasExited() {
				// Not exited, so graceEnd is the kill's: the delegate
				// outlived its SIGKILL by grace. It is not waited for.
				c.abandon()
				return &unreapedError{pid: c.pid, grace: grace}
			}
			exited = true
			// Something that escaped the group holds the output.
			cut = cut || c.stdout >= 0 || c.stderr >= 0
			c.closeFd(&c.stdout)
			c.closeFd(&c.stderr)
			c.closeFd(&c.stdin)
			continue
		}
		fds := make([]unix.PollFd, 0, 4)
		watch := func(fd int, ev int16) {
			if fd >= 0 {
				fds = append(fds, unix.PollFd{Fd: int32(fd), Events: ev}) //nolint:gosec // an fd fits in int32
			}
		}
		watch(c.stdin, unix.POLLOUT)
		watch(c.stdout, unix.POLLIN)
		watch(c.stderr, unix.POLLIN)
		if !exited {
			watch(c.pidfd, unix.POLLIN)
		}
		if _, err := c.ppoll(fds, c.pollTimeout(ctx, now, killed, exited, graceEnd)); err != nil && !errors.Is(err, unix.EINTR) {
			return c.killAndReap(os.NewSyscallError("ppoll", err), grace)
		}
		for _, p := range fds {
			if p.Revents == 0 {
				continue
			}
			switch int(p.Fd) {
			case c.stdin:
				stdin = c.feed(stdin)
			case c.stdout:
				c.drain(&c.stdout, buf, stdout)
			case c.stderr:
				c.drain(&c.stderr, buf, stderr)
			case c.pidfd:
				exited = true
			}
		}
		if c.pidfd < 0 && !exited {
			exited = c.hasExited()
		}
		if exited && graceEnd.IsZero() {
			graceEnd = time.Now().Add(grace)
		}
	}
	c.closeFd(&c.stdin)
	ws, err := c.reap()
	switch {
	case err != nil:
		return err
	case ws.Exited() && ws.ExitStatus() == 0 && cut:
		return exec.ErrWaitDelay
	case !ws.Exited() || ws.ExitStatus() != 0:
		return &exitError{status: ws}
	}
	return nil
}

// killAndReap ends a wait that cannot go on (its ppoll failed): the
// delegate and its process group are killed, as at the deadline, and the
// delegate is reaped once it has exited, checked every 5 ms (ppoll cannot
// be trusted to wait), for at most grace; after that it is given up
// (abandon), as wait gives up one that outlives its kill. cause is wrapped
// in what it returns.
func (c *child) killAndReap(cause error, grace time.Duration) error {
	c.kill()
	for end := time.Now().Add(grace); !c.hasExited(); time.Sleep(5 * time.Millisecond) {
		if !time.Now().Before(end) {
			c.abandon()
			return fmt.Errorf("waiting for pid %d: %w (it was killed, and %w)", c.pid, cause, &unreapedError{pid: c.pid, grace: grace})
		}
	}
	if _, err := c.reap(); err != nil {
		return fmt.Errorf("waiting for pid %d: %w (it was killed, and %w)", c.pid, cause, err)
	}
	return fmt.Errorf("waiting for pid %d: %w (it was killed and reaped)", c.pid, cause)
}

// kill sends SIGKILL to the delegate's process group (whatever it started
// that stayed there) and to the delegate itself, which may have left the
// group: through its pidfd, or by pid where there is none (the child is not
// reaped yet, so its pid, and its group's id, are not reused). Errors
// (ESRCH: already gone) say nothing wait needs.
func (c *child) kill() {
	_ = syscall.Kill(-c.pid, syscall.SIGKILL)
	if c.pidfd >= 0 {
		_ = unix.PidfdSendSignal(c.pidfd, unix.SIGKILL, nil, 0)
	} else {
		_ = syscall.Kill(c.pid, syscall.SIGKILL)
	}
}

// settle lets the scheduler run ctx's timer once its deadline has passed,
// so that ctx.Err() says why the delegate was killed to every caller.
func settle(ctx context.Context) {
	for i := 0; ctx.Err() == nil && i < 1000; i++ {
		time.Sleep(time.Millisecond)
	}
}

// pollTimeout is how long one ppoll may wait, in ms (-1: no bound): until
// ctx's deadline, at most 250 ms while ctx can be canceled otherwise, until
// the output's grace ends, and 5 ms between checks of an exit when there is
// no pidfd (Linux before 5.2). Past the grace's end, wait returns without
// polling: a 0 ms bound never repeats.
func (c *child) pollTimeout(ctx context.Context, now time.Time, killed, exited bool, graceEnd time.Time) int {
	bound := time.Duration(-1)
	at := func(d time.Duration) {
		if d < 0 {
			d = 0
		}
		if bound < 0 || d < bound {
			bound = d
		}
	}
	if !killed && ctx.Done() != nil {
		at(250 * time.Millisecond)
		if dl, ok := ctx.Deadline(); ok {
			at(dl.Sub(now))
		}
	}
	if !graceEnd.IsZero() {
		at(graceEnd.Sub(now))
	}
	if c.pidfd < 0 && !exited {
		at(5 * time.Millisecond)
	}
	if bound < 0 {
		return -1
	}
	return int((bound + time.Millisecond - 1) / time.Millisecond)
}

// feed writes what the pipe takes of stdin and returns the rest; all
// written, or the delegate gone (EPIPE), it closes the pipe.
func (c *child) feed(stdin []byte) []byte {
	n, err := rawIO(unix.SYS_WRITE, c.stdin, stdin)
	switch {
	case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
		return stdin
	case err != nil:
		c.closeFd(&c.stdin) // it exited or closed its stdin without reading it all
		return nil
	}
	stdin = stdin[n:]
	if len(stdin) == 0 {
		c.closeFd(&c.stdin)
	}
	return stdin
}

// drain copies what is readable on *fd to w, and closes *fd at EOF.
func (c *child) drain(fd *int, buf []byte, w io.Writer) {
	for {
		n, err := rawIO(unix.SYS_READ, *fd, buf)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return
		case err != nil || n == 0:
			c.closeFd(fd)
			return
		}
		_, _ = w.Write(buf[:n]) // a capWriter: never fails
		if n < len(buf) {
			return
		}
	}
}

// hasExited reports, without blocking or reaping, whether the child exited.
func (c *child) hasExited() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, c.pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err != nil || info.Signo != 0
}

// reap collects the exited child's status (wait4 by pid: the pid is not
// reused while it is a zombie of ours).
func (c *child) reap() (syscall.WaitStatus, error) {
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(c.pid, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return ws, os.NewSyscallError("wait4", err)
		}
		return ws, nil
	}
}

func (c *child) ppoll(fds []unix.PollFd, timeoutMs int) (int, error) {
	if c.poll != nil {
		return c.poll(fds, timeoutMs)
	}
	return rawPoll(fds, timeoutMs)
}

// rawPoll is ppoll(2), an ordinary (scheduler-aware) system call: see the
// top of this file.
func rawPoll(fds []unix.PollFd, timeoutMs int) (int, error) {
	var ts *unix.Timespec
	if timeoutMs >= 0 {
		t := unix.NsecToTimespec(int64(timeoutMs) * int64(time.Millisecond))
		ts = &t
	}
	var p unsafe.Pointer
	if len(fds) > 0 {
		p = unsafe.Pointer(&fds[0])
	}
	n, _, errno := unix.Syscall6(unix.SYS_PPOLL, uintptr(p), uintptr(len(fds)), uintptr(unsafe.Pointer(ts)), 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// rawIO is read(2) or write(2) of a nonblocking pipe as a raw system call.
func rawIO(trap uintptr, fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, _, errno := unix.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}
