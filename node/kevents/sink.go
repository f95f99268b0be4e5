package kevents

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// Component is the source of Catena's events.
const Component = "catena-agent"

// Sink records facts as core/v1 Events through client-go's record
// broadcaster. Its EventCorrelator aggregates similar events and applies
// the standard spam filter (a token bucket per source and object), and its
// queues are bounded: an event that finds them full is dropped (client-go
// logs it), one the API server refuses is retried a bounded number of
// times and then dropped. Each failed write is counted in
// catena_events_send_errors_total, each event so dropped in
// catena_events_dropped_total; Emit never blocks.
type Sink struct {
	b       record.EventBroadcaster
	rec     record.EventRecorder
	errors  prometheus.Counter
	dropped prometheus.Counter
	sent    *prometheus.CounterVec
}

// NewSink records to cs as events of node's catena-agent. retry is the
// pause between the broadcaster's tries of one event (0: client-go's 10s).
func NewSink(ctx context.Context, cs kubernetes.Interface, node string, reg prometheus.Registerer, retry time.Duration) *Sink {
	s := &Sink{
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "catena_events_send_errors_total",
			Help: "Writes of Kubernetes events that the API server failed or refused; an event is dropped after a bounded number of them."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "catena_events_dropped_total",
			Help: "Kubernetes events dropped after every write of them failed (API server down, slow or refusing)."}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "catena_events_total",
			Help: "Kubernetes events the agent handed to its event broadcaster, by reason."}, []string{"reason"}),
	}
	if reg != nil {
		reg.MustRegister(s.errors, s.dropped, s.sent)
	}
	opts := []record.BroadcasterOption{record.WithContext(ctx)}
	if retry > 0 {
		opts = append(opts, record.WithSleepDuration(retry))
	}
	s.b = record.NewBroadcaster(opts...)
	s.b.StartRecordingToSink(&countingSink{EventSink: &typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")},
		errors: s.errors, dropped: s.dropped, failing: map[string]int{}})
	s.rec = s.b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: Component, Host: node})
	return s
}

// Emit hands one fact to the broadcaster.
func (s *Sink) Emit(f Fact) {
	ref := &corev1.ObjectReference{Kind: f.Object.Kind, APIVersion: "v1", Namespace: f.Object.Namespace,
		Name: f.Object.Name, UID: types.UID(f.Object.UID)}
	if f.Object.Kind == "Node" && ref.UID == "" {
		ref.UID = types.UID(f.Object.Name) // as kubelet refers to its Node
	}
	s.sent.WithLabelValues(f.Reason).Inc()
	s.rec.Event(ref, f.Type, f.Reason, f.Message)
}

// Shutdown stops the broadcaster; events still queued are dropped.
func (s *Sink) Shutdown() { s.b.Shutdown() }

// triesPerEvent is how often client-go's broadcaster tries to write one
// event before it drops it (tools/record's maxTriesPerEvent, unexported;
// TestSinkCountsDrops fails if it changes).
const triesPerEvent = 12

// maxFailing bounds the events whose failed writes are being counted.
const maxFailing = 1024

// countingSink counts the failed writes of the broadcaster's sink, and as
// dropped each event whose every try failed.
type countingSink struct {
	record.EventSink
	errors  prometheus.Counter
	dropped prometheus.Counter

	mu      sync.Mutex
	failing map[string]int // namespace/name of an event: its failed tries
}

var _ record.EventSink = (*countingSink)(nil)

func (c *countingSink) observe(ev *corev1.Event, err error) {
	key := ev.Namespace + "/" + ev.Name
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		delete(c.failing, key)
		return
	}
	c.errors.Inc()
	if _, ok := c.failing[key]; !ok && len(c.failing) >= maxFailing {
		clear(c.failing) // bounded: lose the counts of old failures
	}
	c.failing[key]++
	if c.failing[key] >= triesPerEvent {
		delete(c.failing, key)
		c.dropped.Inc()
	}
}

func (c *countingSink) Create(e *corev1.Event) (*corev1.Event, error) {
	out, err := c.EventSink.Create(e)
	c.observe(e, err)
	return out, err
}

func (c *countingSink) Update(e *corev1.Event) (*corev1.Event, error) {
	out, err := c.EventSink.Update(e)
	c.observe(e, err)
	return out, err
}

func (c *countingSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	out, err := c.EventSink.Patch(e, data)
	c.observe(e, err)
	return out, err
}
