package kevents

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/catena-cni/catena/libchain/events"
	"github.com/catena-cni/catena/node/metrics"
	"github.com/catena-cni/catena/node/nodeconf"
)

// Emitter records facts; Sink is the real one.
type Emitter interface {
	Emit(Fact)
}

var _ Emitter = (*Sink)(nil)

// Node event reasons.
const (
	ReasonConflistWritten = "CatenaConflistWritten"
	ReasonConflistTaken   = "CatenaConflistTaken"
)

// nodeHeldRepeat is how often the Node's held-teardowns Warning is
// repeated while the count stays at or above the threshold.
const nodeHeldRepeat = 10 * time.Minute

// Watcher tails a cache dir's event journal and emits the facts of each
// new operation. It starts at the journal's end: the history written
// before the agent started is not replayed.
type Watcher struct {
	CacheDir      string
	Node          string // the Node's name; "" sends no Node events
	HeldThreshold int    // Node Warning at this many held teardowns; <= 0 never
	Interval      time.Duration
	Emitter       Emitter
	Log           *slog.Logger
	// Unreadable, when set, counts the journal lines the watcher skipped
	// because they are not an operation (events.Tail): no event
	// was made of them. They are logged on Log.
	Unreadable prometheus.Counter

	mapper   *Mapper
	tail     *events.Tail
	ops      []events.Op
	lastHeld time.Time
}

// Start skips what the journal holds now; Run calls it if it was not.
func (w *Watcher) Start() error {
	w.mapper = NewMapper()
	w.tail = &events.Tail{CacheDir: w.CacheDir,
		Handle: func(op events.Op) { w.ops = append(w.ops, op) }, Unreadable: w.Unreadable}
	if w.Log != nil {
		w.tail.Log = w.Log.With("reader", metrics.ReaderEvents)
	}
	err := w.tail.Poll()
	w.ops = nil
	return err
}

// Poll emits the facts of the operations appended since the last poll.
func (w *Watcher) Poll(now time.Time) error {
	err := w.tail.Poll()
	for _, op := range w.ops {
		for _, f := range w.mapper.Map(op) {
			w.Emitter.Emit(f)
		}
	}
	w.ops = w.ops[:0]
	if f, ok := w.mapper.NodeHeld(w.Node, w.HeldThreshold); ok {
		if w.lastHeld.IsZero() || now.Sub(w.lastHeld) >= nodeHeldRepeat {
			w.Emitter.Emit(f)
			w.lastHeld = now
		}
	} else {
		w.lastHeld = time.Time{}
	}
	return err
}

// Run polls every Interval until ctx ends; a failed poll is logged and
// retried at the next tick.
func (w *Watcher) Run(ctx context.Context) error {
	if w.tail == nil {
		if err := w.Start(); err != nil {
			w.Log.Warn("events: reading the event journal", "error", err)
		}
	}
	t := time.NewTicker(w.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			if err := w.Poll(now); err != nil {
				w.Log.Warn("events: reading the event journal", "error", err)
			}
		}
	}
}

// NodeObserver passes the conf dir's conflist facts on to Next and
// records them as events on the Node.
type NodeObserver struct {
	Next    nodeconf.ConflistObserver
	Emitter Emitter
	Node    string

	mu sync.Mutex
}

var _ nodeconf.ConflistObserver = (*NodeObserver)(nil)

func (o *NodeObserver) emit(typ, reason, msg string) {
	if o.Node == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.Emitter.Emit(Fact{Object: Object{Kind: "Node", Name: o.Node}, Type: typ, Reason: reason, Message: msg})
}

// ConflistWritten: the primary is wrapped (anew, or after it changed).
func (o *NodeObserver) ConflistWritten() {
	if o.Next != nil {
		o.Next.ConflistWritten()
	}
	o.emit(Normal, ReasonConflistWritten, "catena-agent wrote the generated conflist that wraps the node's primary CNI config")
}

// ConflistTaken: someone renamed, removed or changed the generated file.
func (o *NodeObserver) ConflistTaken(by string) {
	if o.Next != nil {
		o.Next.ConflistTaken(by)
	}
	msg := "the generated conflist was renamed away, removed or changed by another writer (" + by + "); the agent rewrites it with backoff"
	if by == nodeconf.TakenByCilium {
		msg += "; set Cilium's cni.exclusive: false"
	}
	o.emit(Warning, ReasonConflistTaken, msg)
}

// ConflistBackoff is passed on only.
func (o *NodeObserver) ConflistBackoff(d time.Duration) {
	if o.Next != nil {
		o.Next.ConflistBackoff(d)
	}
}
