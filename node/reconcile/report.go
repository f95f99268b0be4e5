package reconcile

import (
	"time"

	"github.com/catena-cni/catena/cache"
)

// Action is what a pass decided for one record.
type Action string

// The decisions of a pass.
const (
	// Never candidates.
	ActOutOfScope Action = "out-of-scope" // not made by a CRI runtime
	ActAlive      Action = "alive"        // its sandbox is listed, or its netns shows it runs
	ActInFlight   Action = "in-flight"    // its lock is held
	ActRecent     Action = "recent"       // changed within the grace period
	// Candidates.
	ActMarked       Action = "marked"        // phase one: marked now
	ActWouldMark    Action = "would-mark"    // dry run
	ActWaiting      Action = "waiting"       // marked less than the grace period ago
	ActReclaimed    Action = "reclaimed"     // phase two: torn down
	ActWouldReclaim Action = "would-reclaim" // dry run
	ActLeft         Action = "left"          // phase two found a reason not to; the mark is cleared
	ActFailed       Action = "reclaim-failed"
	// Errors, and the doubt of an empty sandbox list, mean keep.
	ActKept Action = "kept"
	// Records that need teardown, retried whatever the runtime says.
	ActRetried     Action = "retried"
	ActWouldRetry  Action = "would-retry"
	ActRetryFailed Action = "retry-failed"
	ActBackoff     Action = "backoff"
	ActDeferred    Action = "deferred" // due, but over the pass's bound of retries
)

// Decision is what a pass did with one record, and why.
type Decision struct {
	Key    cache.Key `json:"key"`
	Action Action    `json:"action"`
	Reason string    `json:"reason,omitempty"`
	// Abandoned are the delegates abandoned by abandonAfter.
	Abandoned []int `json:"abandoned,omitempty"`
}

// RecordCount is how many records of a network are in one phase
// ("unreadable": the record cannot be trusted).
type RecordCount struct {
	Network string `json:"network"`
	Phase   string `json:"phase"`
	Count   int    `json:"count"`
}

// Report is one pass.
type Report struct {
	Start    time.Time     `json:"start"`
	Duration time.Duration `json:"durationNs"`
	DryRun   bool          `json:"dryRun,omitempty"`
	// Records read, and of those in scope; sandboxes listed.
	Records   int `json:"records"`
	InScope   int `json:"inScope"`
	Sandboxes int `json:"sandboxes"`
	// Candidates had no sandbox, a free lock and no change within grace.
	Candidates int `json:"candidates"`
	Marked     int `json:"marked"`
	Reclaimed  int `json:"reclaimed"`
	// Kept counts the records kept because of an error (the runtime or a
	// record could not be read) or of the doubt of an empty sandbox list,
	// KeptCause says which.
	Kept      int    `json:"keptBecauseOfErrors"`
	KeptCause string `json:"keptCause,omitempty"`
	// EmptyList is set when a ListPodSandbox listed no sandboxes and that
	// kept records (their netns proved nothing): KeptCause says so.
	EmptyList bool `json:"runtimeListedNone,omitempty"`
	// RuntimeError is set when a ListPodSandbox failed or was too slow.
	RuntimeError string `json:"runtimeError,omitempty"`
	Retried      int    `json:"retried"`
	RetryFailed  int    `json:"retryFailed"`
	Abandoned    int    `json:"abandoned"`
	// Held records need teardown after the pass (its retries done);
	// OldestHeld is since when the oldest one's DEL has been failing.
	Held       int           `json:"held"`
	OldestHeld time.Duration `json:"oldestHeldNs"`
	Counts     []RecordCount `json:"recordCounts"`
	Errors     []string      `json:"errors"`
	Decisions  []Decision    `json:"decisions"`
}

func (r *Report) decide(key cache.Key, a Action, reason string) {
	r.Decisions = append(r.Decisions, Decision{Key: key, Action: a, Reason: reason})
}

// Observer receives every pass's report (the metrics).
type Observer interface {
	ObservePass(rep *Report)
}
