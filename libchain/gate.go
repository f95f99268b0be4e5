package libchain

import (
	"context"
	"sync"

	"github.com/catena-cni/catena/libchain/invoke"
)

// A stdin gate lets a delegate's process start while the record that says
// "delegate i starting" is still being made durable, and hands the delegate
// its request only once it is. A CNI plugin can do nothing before it has
// read its network config from stdin, so the record still precedes every
// effect of the delegate; what overlaps is only the fsync and the
// delegate's exec and runtime start-up. If the write fails, the delegate
// reads an error instead of its config (EOF on its stdin) and does nothing.
// If Catena dies before the gate opens, the delegate dies with it (its
// parent-death signal) having read nothing.
//
// The write runs in the goroutine of its first waiter: the executor, right
// after it started the delegate's process (the process runs its start-up on
// another CPU meanwhile), or the engine, if the executor never got that far.
// No goroutine of its own: on a one-P runtime, a second runnable goroutine
// while the first blocks in fsync makes the scheduler hand the P to a new
// thread.
type stdinGate struct {
	once  sync.Once
	write func() error
	err   error
}

// openAfter returns the gate that write opens; write runs at the first
// wait.
func openAfter(write func() error) *stdinGate {
	return &stdinGate{write: write}
}

// wait runs the gate's write if no one has yet, blocks until it is done,
// and returns its error.
func (g *stdinGate) wait() error {
	g.once.Do(func() { g.err = g.write() })
	return g.err
}

// withGate returns ctx with g as the stdin gate of the delegate called
// under it (invoke.WithStdinGate).
func withGate(ctx context.Context, g *stdinGate) context.Context {
	return invoke.WithStdinGate(ctx, g.wait)
}
