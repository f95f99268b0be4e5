package libchain

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
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
}

// Executor runs delegate plugins.
type Executor interface {
	// Add invokes ADD and returns the delegate's result.
	Add(ctx context.Context, c Call) (types.Result, error)
	// Run invokes a verb that returns no result: DEL, CHECK, STATUS, GC.
	Run(ctx context.Context, c Call) error
}

// InvokeExecutor runs delegates through the CNI invoke package.
type InvokeExecutor struct {
	Exec invoke.Exec
}

var _ Executor = (*InvokeExecutor)(nil)

// NewInvokeExecutor returns an executor that runs each delegate in its own
// process group (see ProcExec).
func NewInvokeExecutor() *InvokeExecutor {
	return &InvokeExecutor{Exec: &ProcExec{}}
}

func (e *InvokeExecutor) find(c Call) (string, error) {
	if err := validateType(c.Type); err != nil {
		return "", types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("delegate type: %v", err), "")
	}
	if c.Args.Path == "" {
		return "", types.NewError(types.ErrInvalidEnvironmentVariables, "CNI_PATH is empty: cannot find delegate "+c.Type, "")
	}
	paths := CNIPathDirs(c.Args.Path)
	if len(paths) == 0 {
		return "", types.NewError(types.ErrInvalidEnvironmentVariables,
			fmt.Sprintf("CNI_PATH %q has no absolute directory: cannot find delegate %s", c.Args.Path, c.Type), "")
	}
	p, err := e.Exec.FindInPath(c.Type, paths)
	if err != nil {
		return "", types.NewError(types.ErrPluginNotAvailable, fmt.Sprintf("plugin %q not found in CNI_PATH %q: %v", c.Type, c.Args.Path, err), "")
	}
	if !filepath.IsAbs(p) {
		return "", types.NewError(types.ErrPluginNotAvailable, fmt.Sprintf("plugin %q: found %q in CNI_PATH %q, not an absolute path", c.Type, p, c.Args.Path), "")
	}
	return p, nil
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

func (c Call) invokeArgs() *invoke.Args {
	return &invoke.Args{
		Command:       c.Verb,
		ContainerID:   c.Args.ContainerID,
		NetNS:         c.Args.NetNS,
		IfName:        c.Args.IfName,
		PluginArgsStr: c.Args.Args,
		Path:          c.Args.Path,
	}
}

// Add implements Executor.
func (e *InvokeExecutor) Add(ctx context.Context, c Call) (types.Result, error) {
	p, err := e.find(c)
	if err != nil {
		return nil, err
	}
	return invoke.ExecPluginWithResult(ctx, p, c.Config, c.invokeArgs(), e.Exec)
}

// Run implements Executor.
func (e *InvokeExecutor) Run(ctx context.Context, c Call) error {
	p, err := e.find(c)
	if err != nil {
		return err
	}
	return invoke.ExecPluginWithoutResult(ctx, p, c.Config, c.invokeArgs(), e.Exec)
}
