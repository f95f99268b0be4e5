package metrics

import (
	"fmt"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/catena-cni/catena/libchain/events"
)

// maxDelegatePairs bounds the distinct (network, type) pairs of
// catena_delegate_duration_seconds: a journal line can name any network
// and any delegate type, a node runs a handful of each.
const maxDelegatePairs = 64

// maxNameLen is the longest network or delegate type kept as a label.
const maxNameLen = 64

// writeBuckets span one fsync of a record on a fast disk (100 µs) to a
// disk that stalls (1 s).
var writeBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// lockBuckets are opBuckets from 1 ms: most operations find their
// attachment's lock free, and lockTimeout (30 s by default) ends a wait.
var lockBuckets = append([]float64{.001}, opBuckets...)

// delegateVerbs are the CNI verbs a delegate is called with.
var delegateVerbs = []string{"ADD", "DEL", "CHECK", "STATUS", "GC", "VERSION"}

// opTimes is where the operations' time went: each delegate call, the
// wait for the attachment's lock, the durable writes of the record.
type opTimes struct {
	delegateDuration *prometheus.HistogramVec
	lockWait         *prometheus.HistogramVec
	writeDuration    *prometheus.HistogramVec
	writes           *prometheus.CounterVec

	mu    sync.Mutex
	pairs map[[2]string]bool // the (network, type) pairs given their own series
}

func newOpTimes(reg prometheus.Registerer) *opTimes {
	t := &opTimes{pairs: make(map[[2]string]bool)}
	t.delegateDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "catena_delegate_duration_seconds",
		Help: fmt.Sprintf("Duration of each delegate call of the operations read from the event journal, by network (of the attachment; empty for an operation of none), "+
			"delegate type, verb (add, del, check, status, gc, version, else other) and outcome (ok or error). A network or type that is not 1 to %d letters, digits, '.', '_' or '-' is other; "+
			"past %d distinct (network, type) pairs, any new pair is counted as network and type other.", maxNameLen, maxDelegatePairs),
		Buckets: opBuckets}, []string{"network", "type", "verb", "outcome"})
	t.lockWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "catena_lock_wait_seconds",
		Help: "Time the operations read from the event journal waited for their attachment's lock, by verb.", Buckets: lockBuckets}, []string{"verb"})
	t.writeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "catena_record_write_seconds",
		Help:    "Time each operation read from the event journal that wrote its record spent in the record's durable writes and removals (each a write or rename and an fsync), all of them together, by verb.",
		Buckets: writeBuckets}, []string{"verb"})
	t.writes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "catena_record_writes_total",
		Help: "Durable writes and removals of records made by the operations read from the event journal, by verb."}, []string{"verb"})
	reg.MustRegister(t.delegateDuration, t.lockWait, t.writeDuration, t.writes)
	return t
}

// observe times one operation of the event journal.
func (t *opTimes) observe(op events.Op) {
	verb := label(op.Verb)
	t.lockWait.WithLabelValues(verb).Observe(op.LockWait.Seconds())
	if op.WriteCount > 0 {
		t.writeDuration.WithLabelValues(verb).Observe(op.Writes.Seconds())
		t.writes.WithLabelValues(verb).Add(float64(op.WriteCount))
	}
	network, _, _ := strings.Cut(op.Attachment, "/")
	for _, c := range op.Calls {
		outcome := "ok"
		if c.Error != "" {
			outcome = "error"
		}
		n, typ := t.pair(network, c.Type)
		t.delegateDuration.WithLabelValues(n, typ, oneOf(c.Verb, delegateVerbs), outcome).Observe(c.Duration.Seconds())
	}
}

// pair bounds a call's network and type: each a name, and the pair one of
// the first maxDelegatePairs seen, else other.
func (t *opTimes) pair(network, typ string) (string, string) {
	if network != "" && !isName(network) {
		network = "other"
	}
	if !isName(typ) {
		typ = "other"
	}
	p := [2]string{network, typ}
	if p == [2]string{"other", "other"} {
		return "other", "other"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.pairs[p] {
		if len(t.pairs) >= maxDelegatePairs {
			return "other", "other"
		}
		t.pairs[p] = true
	}
	return network, typ
}

// isName reports whether s looks like a CNI network or plugin name: 1 to
// maxNameLen ASCII letters, digits, '.', '_' or '-'.
func isName(s string) bool {
	if s == "" || len(s) > maxNameLen {
		return false
	}
	for _, r := range s {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '.', r == '_', r == '-':
		default:
			return false
		}
	}
	return true
}
