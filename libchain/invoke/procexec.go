package invoke

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	cniinvoke "github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	"golang.org/x/sys/unix"

	"github.com/catena-cni/catena/libchain/internal/failpoint"
	"github.com/catena-cni/catena/libchain/internal/textbound"
)

// ProcExec implements the CNI invoke package's Exec like its RawExec, with
// these differences:
//
//   - each delegate runs in its own process group, and when ctx ends (the
//     delegate timeout), the delegate and its whole group are killed (the
//     delegate even if it left the group);
//   - the call is bounded: it returns at most outputGrace (or the grace
//     WithOutputGrace gave ctx) after ctx ends, even if the killed
//     delegate has not exited by then (stuck in the kernel, or in a frozen
//     cgroup): that fails the call as a timeout, naming the delegate, and
//     leaves the process to be reaped when it dies (spawn.go);
//   - each delegate gets SIGKILL as its parent-death signal, so a delegate
//     cannot finish its ADD after Catena itself was killed;
//   - what a delegate prints is bounded: the first MaxResult bytes of its
//     stdout (more is an error) and the first MaxStderr bytes of its stderr
//     are kept, the rest is drained and counted, never buffered;
//   - its stderr reaches Stderr whatever its outcome;
//   - under a stdin gate (WithStdinGate), it gets its request only once
//     the gate returned nil;
//   - should the wait's ppoll fail (anything but EINTR), the delegate and
//     its group are killed and it is reaped (at most outputGrace), and the
//     call fails naming the delegate, its outcome unknown.
//
// Known gap: Linux sends the parent-death signal when the OS thread that
// forked the child exits, not the process. The Go runtime does not retire
// threads unless a goroutine exits while locked to one, which Catena never
// does, so in practice this fires only when Catena dies.
type ProcExec struct {
	// Stderr receives the delegates' stderr, if set.
	Stderr io.Writer
	// poll is the ppoll of each wait; nil means ppoll(2) (child.poll).
	poll func(fds []unix.PollFd, timeoutMs int) (int, error)
}

var _ cniinvoke.Exec = (*ProcExec)(nil)

const (
	// outputGrace bounds the wait for a delegate's output after it exited
	// or was killed, and the wait for a killed delegate's exit.
	outputGrace = 10 * time.Second
	// MaxResult bounds a delegate's stdout: its result or error.
	MaxResult = 1 << 20
	// MaxStderr is how much of a delegate's stderr is passed on.
	MaxStderr = 64 << 10
)

// ExecPlugin implements the CNI invoke package's Exec.
func (e *ProcExec) ExecPlugin(ctx context.Context, pluginPath string, stdinData []byte, environ []string) ([]byte, error) {
	if !filepath.IsAbs(pluginPath) {
		// exec would look a bare name up in $PATH.
		return nil, types.NewError(types.ErrPluginNotAvailable, fmt.Sprintf("catena: delegate %q is not an absolute path: refusing to run it", pluginPath), "")
	}
	stdout, stderr := &capWriter{max: MaxResult}, &capWriter{max: MaxStderr}
	for attempt := 0; ; attempt++ {
		stdout.reset()
		stderr.reset()
		err := e.run(ctx, pluginPath, stdinData, environ, stdout, stderr)
		// The binary may be being replaced; the reference RawExec retries too.
		if err != nil && ctx.Err() == nil && strings.Contains(err.Error(), "text file busy") && attempt < 5 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		e.passStderr(pluginPath, stderr)
		var unreaped *unreapedError
		var sysErr *os.SyscallError
		switch {
		case errors.As(err, &sysErr) && sysErr.Syscall == "ppoll":
			// wait could not go on, and killed the delegate (killAndReap).
			return nil, fmt.Errorf("%s was killed, its outcome unknown: %w", pluginPath, err)
		case errors.As(err, &unreaped):
			// Killed at ctx's end (ctx.Err() may lag its deadline).
			return nil, fmt.Errorf("%s was killed, but %w; its outcome is unknown, and it is left to be reaped: %w",
				pluginPath, err, cmp.Or(ctx.Err(), context.DeadlineExceeded))
		case err != nil && ctx.Err() != nil:
			return nil, fmt.Errorf("%s was killed: %w", pluginPath, ctx.Err())
		case stdout.dropped > 0:
			return nil, types.NewError(types.ErrDecodingFailure, fmt.Sprintf("catena: the delegate printed more than %d bytes on stdout (%d): not a result or error catena accepts",
				MaxResult, int64(len(stdout.buf))+stdout.dropped), "")
		case err != nil:
			return nil, withStatus(err, pluginErr(err, stdout.buf, stderr.buf))
		}
		return stdout.buf, nil
	}
}

type graceKey struct{}

// WithOutputGrace returns ctx under which a delegate call waits at most
// grace (never more than outputGrace) for the delegate's output once it
// exited or was killed at ctx's end, and for its exit after that kill: a
// call under ctx returns at most grace after ctx's deadline, even when
// something the delegate left outside its process group holds its output
// open. A caller whose whole call must fit in a bound sets ctx's deadline
// grace before it.
func WithOutputGrace(ctx context.Context, grace time.Duration) context.Context {
	return context.WithValue(ctx, graceKey{}, grace)
}

// outputGraceOf is the output grace of a call under ctx.
func outputGraceOf(ctx context.Context) time.Duration {
	if g, ok := ctx.Value(graceKey{}).(time.Duration); ok && g >= 0 {
		return min(g, outputGrace)
	}
	return outputGrace
}

// run runs the delegate once and waits for it (spawn.go).
func (e *ProcExec) run(ctx context.Context, pluginPath string, stdinData []byte, environ []string, stdout, stderr io.Writer) error {
	c, err := spawn(pluginPath, environ)
	if err != nil {
		return err
	}
	defer c.close()
	c.poll = e.poll
	// The delegate starts while its caller makes its record durable; it
	// gets its request only once the gate opened (gate.go). A closed gate
	// leaves its stdin empty: it reads EOF.
	if AwaitStdinGate(ctx) == nil {
		failpoint.Hit(runningPoint(environ))
	} else {
		stdinData = nil
	}
	return c.wait(ctx, stdinData, stdout, stderr, outputGraceOf(ctx))
}

// passStderr writes what was kept of a delegate's stderr to e.Stderr, and
// says how much was dropped.
func (e *ProcExec) passStderr(pluginPath string, stderr *capWriter) {
	if e.Stderr == nil || len(stderr.buf) == 0 {
		return
	}
	// Best effort: if stderr fails, there is nowhere left to say so.
	_, _ = e.Stderr.Write(stderr.buf)
	if stderr.dropped > 0 {
		_, _ = fmt.Fprintf(e.Stderr, "\n... [truncated %d bytes] of the stderr of %s\n", stderr.dropped, pluginPath)
	}
}

// capWriter keeps the first max bytes written to it and counts, without
// keeping, the rest: a delegate's output is drained whatever its size.
type capWriter struct {
	buf     []byte
	max     int
	dropped int64
}

var _ io.Writer = (*capWriter)(nil)

func (w *capWriter) Write(p []byte) (int, error) {
	keep := min(len(p), w.max-len(w.buf))
	w.buf = append(w.buf, p[:keep]...)
	w.dropped += int64(len(p) - keep)
	return len(p), nil
}

func (w *capWriter) reset() { w.buf, w.dropped = w.buf[:0], 0 }

// runningPoint names the crash point of a running delegate by its verb.
func runningPoint(environ []string) string {
	for _, kv := range environ {
		switch kv {
		case "CNI_COMMAND=ADD":
			return "add-running"
		case "CNI_COMMAND=DEL":
			return "del-running"
		}
	}
	return ""
}

// pluginErr is the error of a delegate that failed: the CNI error it
// printed, else what it said on stderr, bounded (textbound).
func pluginErr(err error, stdout, stderr []byte) *types.Error {
	emsg := types.Error{}
	switch {
	case len(stdout) == 0 && len(stderr) == 0:
		emsg.Msg = fmt.Sprintf("plugin failed with no error message: %v", err)
	case len(stdout) == 0:
		emsg.Msg = fmt.Sprintf("plugin failed: %q: %v", textbound.Bound(strings.TrimSpace(string(stderr))), err)
	default:
		if perr := json.Unmarshal(stdout, &emsg); perr != nil {
			emsg = types.Error{Msg: fmt.Sprintf("plugin failed and its error %q does not parse: %v", textbound.Bound(string(stdout)), perr)}
		} else if emsg.Code == 0 && emsg.Msg == "" {
			// Not an error: a result. Say why the call failed anyway.
			emsg = types.Error{Msg: fmt.Sprintf("plugin failed after printing a success result: %v", err)}
		} else {
			emsg.Msg, emsg.Details = textbound.Bound(emsg.Msg), textbound.Bound(emsg.Details)
		}
	}
	return &emsg
}

// FindInPath implements the CNI invoke package's Exec.
func (e *ProcExec) FindInPath(plugin string, paths []string) (string, error) {
	return cniinvoke.FindInPath(plugin, paths)
}

// Decode implements the CNI invoke package's Exec.
func (e *ProcExec) Decode(jsonBytes []byte) (version.PluginInfo, error) {
	return (&version.PluginDecoder{}).Decode(jsonBytes)
}
