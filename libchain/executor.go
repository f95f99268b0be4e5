package libchain

import (
	"context"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/catena-cni/catena/libchain/invoke"
)

// RuntimeArgs are the CNI_* values a delegate is called with.
type RuntimeArgs = invoke.RuntimeArgs

// Call is one invocation of one delegate.
type Call = invoke.Call

// Executor runs delegate plugins. The engine sees delegates only through
// it; invoke.Exec runs them as processes, and the tests' fakes in memory.
// A call under a stdin gate (invoke.WithStdinGate) acts only once the gate
// returned nil.
type Executor interface {
	// Add invokes ADD and returns the delegate's result.
	Add(ctx context.Context, c Call) (types.Result, error)
	// Run invokes a verb that returns no result: DEL, CHECK, STATUS, GC.
	Run(ctx context.Context, c Call) error
}

var _ Executor = (*invoke.Exec)(nil)
