package libchain

import (
	"context"
	"io"
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
type stdinGate struct {
	done chan struct{}
	err  error
}

type gateKey struct{}

// openAfter runs write in the background and returns the gate it opens.
func openAfter(write func() error) *stdinGate {
	g := &stdinGate{done: make(chan struct{})}
	go func() {
		g.err = write()
		close(g.done)
	}()
	return g
}

// wait blocks until the gate's write is done and returns its error.
func (g *stdinGate) wait() error {
	<-g.done
	return g.err
}

func withGate(ctx context.Context, g *stdinGate) context.Context {
	return context.WithValue(ctx, gateKey{}, g)
}

// gateOf returns the gate a delegate call must pass, or nil.
func gateOf(ctx context.Context) *stdinGate {
	g, _ := ctx.Value(gateKey{}).(*stdinGate)
	return g
}

// awaitGate blocks until ctx's gate (if any) opens or ctx ends, and returns
// why the delegate must not get its request, if it must not.
func awaitGate(ctx context.Context) error {
	g := gateOf(ctx)
	if g == nil {
		return nil
	}
	select {
	case <-g.done:
		return g.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gatedReader is a delegate's stdin: nothing until the gate opens.
type gatedReader struct {
	ctx    context.Context
	r      io.Reader
	passed bool
}

func (g *gatedReader) Read(p []byte) (int, error) {
	if !g.passed {
		if err := awaitGate(g.ctx); err != nil {
			return 0, err
		}
		g.passed = true
	}
	return g.r.Read(p)
}
