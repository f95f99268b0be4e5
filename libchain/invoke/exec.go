package invoke

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	cniinvoke "github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/catena-cni/catena/libchain/tracectx"
)

// RuntimeArgs are the CNI_* values a delegate is called with.
type RuntimeArgs struct {
	ContainerID string
	NetNS       string
	IfName      string
	Args        string
	// Path is CNI_PATH, a list of directories. Delegates are found only there.
	Path string
}

// Call is one invocation of one delegate.
type Call struct {
	Verb   string // ADD, DEL, CHECK, STATUS or GC
	Type   string // plain binary name, resolved in Args.Path
	Config []byte // the delegate's network config on stdin
	Args   RuntimeArgs
	// Trace is the trace context the delegate continues, its parent-id
	// the call's own span: the delegate gets it as TRACEPARENT,
	// TRACESTATE and BAGGAGE. The zero Context: it gets none of the
	// three, whatever Catena's own environment holds.
	Trace tracectx.Context
}

// Exec runs delegates: it finds each in CNI_PATH and runs it through the
// CNI invoke package over Proc. It is the engine's Executor
// (libchain.Executor).
type Exec struct {
	// Proc runs a delegate's process: a ProcExec (NewExec).
	Proc cniinvoke.Exec

	env envMemo
}

// envMemo keeps the environment of the last delegate call, but for its
// trace context, for the next one with the same verb, CNI_* values and
// process environment: the delegates of one ADD, CHECK or DEL share it.
// Building it (the CNI invoke package's Args.AsEnv: a copy of the process
// environment, a map, a Sprintf per variable) was a tenth of catena's own
// CPU for each delegate it runs. The environment is AsEnv's, in AsEnv's
// (map) order, without the trace context carriers catena inherited
// (tracectx.IsCarrier); each call appends its own (Call.Trace).
type envMemo struct {
	mu      sync.Mutex
	verb    string
	args    RuntimeArgs
	environ []string // the process environment it was built from
	env     []string // clipped: an append copies it
}

// of returns c's environment.
func (m *envMemo) of(c Call) []string {
	environ := os.Environ()
	m.mu.Lock()
	if m.env == nil || m.verb != c.Verb || m.args != c.Args || !slices.Equal(m.environ, environ) {
		env := slices.DeleteFunc(c.invokeArgs().AsEnv(), tracectx.IsCarrier)
		m.verb, m.args, m.environ, m.env = c.Verb, c.Args, environ, slices.Clip(env)
	}
	env := m.env
	m.mu.Unlock()
	return c.Trace.AppendEnv(env)
}

// envArgs is an environment made already, as the CNI invoke package's
// CNIArgs.
type envArgs []string

func (a envArgs) AsEnv() []string { return a }

// untraced runs what the CNI invoke package runs over Exec without the
// trace context carriers catena inherited: a VERSION query is no call of
// an operation's, and its answer is cached for any later one.
type untraced struct{ cniinvoke.Exec }

func (u untraced) ExecPlugin(ctx context.Context, pluginPath string, stdinData []byte, environ []string) ([]byte, error) {
	return u.Exec.ExecPlugin(ctx, pluginPath, stdinData, slices.DeleteFunc(slices.Clone(environ), tracectx.IsCarrier))
}

// NewExec returns an executor that runs each delegate in its own process
// group (see ProcExec), passing on its stderr to stderr, if not nil.
func NewExec(stderr io.Writer) *Exec {
	return &Exec{Proc: &ProcExec{Stderr: stderr}}
}

// Find returns the absolute path of the delegate typ in the absolute
// directories of cniPath (CNIPathDirs), or a CNI error saying why not.
func (e *Exec) Find(typ, cniPath string) (string, error) {
	if err := ValidateType(typ); err != nil {
		return "", types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("delegate type: %v", err), "")
	}
	if cniPath == "" {
		return "", types.NewError(types.ErrInvalidEnvironmentVariables, "CNI_PATH is empty: cannot find delegate "+typ, "")
	}
	paths := CNIPathDirs(cniPath)
	if len(paths) == 0 {
		return "", types.NewError(types.ErrInvalidEnvironmentVariables,
			fmt.Sprintf("CNI_PATH %q has no absolute directory: cannot find delegate %s", cniPath, typ), "")
	}
	p, err := e.Proc.FindInPath(typ, paths)
	if err != nil {
		return "", types.NewError(types.ErrPluginNotAvailable, fmt.Sprintf("plugin %q not found in CNI_PATH %q: %v", typ, cniPath, err), "")
	}
	if !filepath.IsAbs(p) {
		return "", types.NewError(types.ErrPluginNotAvailable, fmt.Sprintf("plugin %q: found %q in CNI_PATH %q, not an absolute path", typ, p, cniPath), "")
	}
	return p, nil
}

// Version asks the delegate binary at path VERSION, as any delegate call
// runs (Proc: its process group, bounded output, ctx's deadline), with no
// trace context.
func (e *Exec) Version(ctx context.Context, path string) (version.PluginInfo, error) {
	return cniinvoke.GetVersionInfo(ctx, path, untraced{e.Proc})
}

// ValidateType accepts only a plain binary name, so that it can be resolved
// inside CNI_PATH and nowhere else.
func ValidateType(t string) error {
	switch {
	case t == "":
		return fmt.Errorf("empty")
	case t == "." || t == "..":
		return fmt.Errorf("%q is not a plugin name", t)
	case strings.ContainsAny(t, "/\\\x00"):
		return fmt.Errorf("%q must be a plain binary name found in CNI_PATH, without '/'", t)
	}
	return nil
}

// CNIPathDirs is the absolute directories of CNI_PATH, in order. An empty,
// "." or other relative element is ignored: it would name the plugin by a
// bare or relative name, which exec resolves through $PATH or the working
// directory, outside CNI_PATH.
func CNIPathDirs(cniPath string) []string {
	var dirs []string
	for _, d := range filepath.SplitList(cniPath) {
		if filepath.IsAbs(d) {
			dirs = append(dirs, filepath.Clean(d))
		}
	}
	return dirs
}

func (c Call) invokeArgs() *cniinvoke.Args {
	return &cniinvoke.Args{
		Command:       c.Verb,
		ContainerID:   c.Args.ContainerID,
		NetNS:         c.Args.NetNS,
		IfName:        c.Args.IfName,
		PluginArgsStr: c.Args.Args,
		Path:          c.Args.Path,
	}
}

// Add invokes ADD and returns the delegate's result (libchain.Executor).
func (e *Exec) Add(ctx context.Context, c Call) (types.Result, error) {
	p, err := e.Find(c.Type, c.Args.Path)
	if err != nil {
		return nil, err
	}
	// cniinvoke.ExecPluginWithResult, with the environment of e.env.
	return cniinvoke.ExecPluginWithResult(ctx, p, c.Config, envArgs(e.env.of(c)), e.Proc)
}

// Run invokes a verb that returns no result: DEL, CHECK, STATUS, GC
// (libchain.Executor).
func (e *Exec) Run(ctx context.Context, c Call) error {
	p, err := e.Find(c.Type, c.Args.Path)
	if err != nil {
		return err
	}
	// cniinvoke.ExecPluginWithoutResult, with the environment of e.env.
	_, err = e.Proc.ExecPlugin(ctx, p, c.Config, e.env.of(c))
	return err
}
