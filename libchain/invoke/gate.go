package invoke

import "context"

// A stdin gate lets a delegate's process start while its caller still
// prepares (the engine: makes the record that says "delegate i starting"
// durable), and hands the delegate its request only once the gate has
// returned nil. A CNI plugin can do nothing before it has read its network
// config from stdin, so what overlaps is only the caller's work and the
// delegate's exec and runtime start-up. If the gate returns an error, the
// delegate reads EOF instead of its config and does nothing.
//
// ProcExec runs the gate in the calling goroutine, right after it started
// the delegate's process (which runs its start-up on another CPU
// meanwhile); an executor that never gets that far, or runs no process,
// leaves it to its caller.

type gateKey struct{}

// WithStdinGate returns ctx with gate: a delegate started under ctx gets
// its request on stdin only if gate, run after the delegate started,
// returns nil.
func WithStdinGate(ctx context.Context, gate func() error) context.Context {
	return context.WithValue(ctx, gateKey{}, gate)
}

// AwaitStdinGate runs ctx's stdin gate, if any, and returns why the
// delegate must not get its request, if it must not. An Executor that runs
// no process (a test's fake) calls it before it acts on a call.
func AwaitStdinGate(ctx context.Context) error {
	gate, _ := ctx.Value(gateKey{}).(func() error)
	if gate == nil {
		return nil
	}
	return gate()
}
