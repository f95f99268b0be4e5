package libchain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// ProcExec implements invoke.Exec like invoke.RawExec, with two differences
// that keep delegates from outliving Catena:
//
//   - each delegate runs in its own process group, and when ctx ends (the
//     delegate timeout), the whole group is killed, not only the delegate;
//   - each delegate gets SIGKILL as its parent-death signal, so a delegate
//     cannot finish its ADD after Catena itself was killed.
//
// Known gap: Linux sends the parent-death signal when the OS thread that
// forked the child exits, not the process. The Go runtime does not retire
// threads unless a goroutine exits while locked to one, which Catena never
// does, so in practice this fires only when Catena dies.
type ProcExec struct {
	// Stderr receives the delegates' stderr, if set.
	Stderr io.Writer
}

var _ invoke.Exec = (*ProcExec)(nil)

// outputGrace bounds the wait for a delegate's output after it exited.
const outputGrace = 10 * time.Second

// ExecPlugin implements invoke.Exec.
func (e *ProcExec) ExecPlugin(ctx context.Context, pluginPath string, stdinData []byte, environ []string) ([]byte, error) {
	if !filepath.IsAbs(pluginPath) {
		// exec would look a bare name up in $PATH.
		return nil, types.NewError(types.ErrPluginNotAvailable, fmt.Sprintf("catena: delegate %q is not an absolute path: refusing to run it", pluginPath), "")
	}
	var stdout, stderr bytes.Buffer
	for attempt := 0; ; attempt++ {
		stdout.Reset()
		stderr.Reset()
		c := exec.CommandContext(ctx, pluginPath)
		c.Env = environ
		c.Stdin = &gatedReader{ctx: ctx, r: bytes.NewReader(stdinData)}
		c.Stdout = &stdout
		c.Stderr = &stderr
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		c.Cancel = func() error {
			// Kill the whole group: the delegate and anything it started.
			return syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		}
		// How long Wait waits for the output pipes to close once the
		// delegate exited or its group was killed. A delegate that exited
		// with success wrote its result before exiting: a reader starved of
		// CPU on a saturated node (seen: over 1s) must not turn that into a
		// failure. Only a process that escaped the group holds them longer.
		c.WaitDelay = outputGrace
		err := c.Start()
		if err == nil {
			if awaitGate(ctx) == nil {
				hit(runningPoint(environ))
			}
			err = c.Wait()
		}
		if err == nil {
			break
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("%s was killed: %w", pluginPath, ctxErr)
		}
		// The binary may be being replaced; the reference RawExec retries too.
		if strings.Contains(err.Error(), "text file busy") && attempt < 5 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		return nil, pluginErr(err, stdout.Bytes(), stderr.Bytes())
	}
	if e.Stderr != nil && stderr.Len() > 0 {
		_, _ = stderr.WriteTo(e.Stderr)
	}
	return stdout.Bytes(), nil
}

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

func pluginErr(err error, stdout, stderr []byte) error {
	emsg := types.Error{}
	switch {
	case len(stdout) == 0 && len(stderr) == 0:
		emsg.Msg = fmt.Sprintf("plugin failed with no error message: %v", err)
	case len(stdout) == 0:
		emsg.Msg = fmt.Sprintf("plugin failed: %q: %v", strings.TrimSpace(string(stderr)), err)
	default:
		if perr := json.Unmarshal(stdout, &emsg); perr != nil {
			emsg = types.Error{Msg: fmt.Sprintf("plugin failed and its error %q does not parse: %v", string(stdout), perr)}
		} else if emsg.Code == 0 && emsg.Msg == "" {
			// Not an error: a result. Say why the call failed anyway.
			emsg = types.Error{Msg: fmt.Sprintf("plugin failed after printing a success result: %v", err)}
		}
	}
	return &emsg
}

// FindInPath implements invoke.Exec.
func (e *ProcExec) FindInPath(plugin string, paths []string) (string, error) {
	return invoke.FindInPath(plugin, paths)
}

// Decode implements invoke.Exec.
func (e *ProcExec) Decode(jsonBytes []byte) (version.PluginInfo, error) {
	return (&version.PluginDecoder{}).Decode(jsonBytes)
}

// isTimeout reports whether err says the delegate was stopped by a deadline
// or cancellation, so that its outcome is unknown.
func isTimeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}
