package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain"
)

// Reclaimer tears down one record (libchain.Engine).
type Reclaimer interface {
	Reclaim(ctx context.Context, key cache.Key, opts libchain.ReclaimOptions) (libchain.ReclaimResult, error)
}

var _ Reclaimer = (*libchain.Engine)(nil)

// Defaults of Options.
const (
	DefaultGrace          = 2 * time.Minute
	DefaultRuntimeTimeout = 10 * time.Second
)

// Options tune a Reconciler.
type Options struct {
	// Grace: a record changed within it is never a candidate, and a mark
	// must be at least this old before its reclaim. 0: DefaultGrace.
	Grace time.Duration
	// RuntimeTimeout bounds each ListPodSandbox. 0: DefaultRuntimeTimeout.
	RuntimeTimeout time.Duration
	// AbandonAfter, when positive, abandons a delegate whose DEL has
	// failed for that long (off by default).
	AbandonAfter time.Duration
	// DryRun writes no mark and tears nothing down.
	DryRun bool
	// CNIPath is where the delegates are found.
	CNIPath string
	// DelegateTimeout bounds each DEL. 0: libchain's default.
	DelegateTimeout time.Duration
	// MaxRetries bounds the teardown retries of one pass (the records due
	// soonest go first); 0: libchain.DefaultRetryMaxAttempts.
	MaxRetries int
	// RetryWorkers bounds the retries run at once; 0:
	// libchain.DefaultRetryWorkers.
	RetryWorkers int
}

// Reconciler runs passes over one cache dir.
type Reconciler struct {
	Store   cache.Store
	Marks   cache.MarkStore
	Runtime SandboxLister
	// NetNS shows the node's network namespaces (ProcNetNS); nil: no
	// record's netns proves anything.
	NetNS   NetNSObserver
	Engine  Reclaimer
	Backoff Backoff
	// Observer, if set, gets every pass's report.
	Observer Observer
	Log      *slog.Logger
	// Now is the clock; nil means time.Now.
	Now  func() time.Time
	Opts Options
	// RetrierDir is the cache dir whose retrier lock Loop holds while it
	// runs ("": none).
	RetrierDir string
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Reconciler) log() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.New(slog.DiscardHandler)
}

func (r *Reconciler) grace() time.Duration {
	if r.Opts.Grace > 0 {
		return r.Opts.Grace
	}
	return DefaultGrace
}

func (r *Reconciler) runtimeTimeout() time.Duration {
	if r.Opts.RuntimeTimeout > 0 {
		return r.Opts.RuntimeTimeout
	}
	return DefaultRuntimeTimeout
}

// pass is the state of one pass.
type pass struct {
	*Reconciler
	rep   *Report
	now   time.Time
	marks map[cache.Key]Mark
	recs  []*cache.Record
	// keep is why nothing may be reclaimed in this pass ("": reclaim).
	keep string
	due  []*cache.Record
	// procs is this phase's look at the node's processes (nil: not yet).
	procs *Processes
}

// Mark is cache.Mark, named here for the package's readers.
type Mark = cache.Mark

// Pass runs one pass and returns its report; the error is set when the
// pass could not do its job (records or marks not listed, runtime error),
// and is already in the report.
func (r *Reconciler) Pass(ctx context.Context) (*Report, error) {
	p := &pass{Reconciler: r, now: r.now(), rep: &Report{Errors: []string{}, Decisions: []Decision{}, DryRun: r.Opts.DryRun}}
	p.rep.Start = p.now
	err := p.run(ctx)
	p.rep.Duration = r.now().Sub(p.now)
	if err != nil {
		p.rep.Errors = append(p.rep.Errors, err.Error())
	}
	if p.keep != "" {
		r.log().Warn("reconcile: nothing reclaimed in this pass", "cause", p.keep, "kept", p.rep.Kept)
	} else if p.rep.EmptyList {
		r.log().Warn("reconcile: "+emptyList+": only records whose netns proves their sandbox gone are candidates", "kept", p.rep.Kept)
	}
	if r.Observer != nil {
		r.Observer.ObservePass(p.rep)
	}
	return p.rep, err
}

func (p *pass) run(ctx context.Context) error {
	marks, err := p.Marks.Marks()
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	p.marks = marks
	// Rule 2: the records first, then the runtime.
	if err := p.readRecords(); err != nil {
		return err
	}
	alive, lerr := listWithin(ctx, p.Runtime, p.runtimeTimeout())
	if lerr != nil {
		p.rep.RuntimeError = lerr.Error()
		p.keepAll("runtime error: " + lerr.Error())
	}
	p.rep.Sandboxes = len(alive)
	var retry []*cache.Record
	for _, rec := range p.recs {
		if rec.Phase != cache.PhaseComplete {
			retry = append(retry, rec)
			continue
		}
		p.decide(rec, alive)
	}
	p.reclaimDue(ctx)
	p.clearStaleMarks()
	p.countHeld(p.retry(ctx, retry))
	if lerr != nil {
		return fmt.Errorf("reconcile: %w", lerr)
	}
	return nil
}

// keepAll notes that nothing may be reclaimed in this pass.
func (p *pass) keepAll(cause string) {
	if p.keep == "" {
		p.keep = cause
		p.rep.KeptCause = cause
	}
}

// readRecords loads every record; one that cannot be read keeps the pass
// from reclaiming anything.
func (p *pass) readRecords() error {
	keys, err := p.Store.List()
	if err != nil {
		return fmt.Errorf("reconcile: listing records: %w", err)
	}
	counts := map[[2]string]int{}
	p.recs = make([]*cache.Record, 0, len(keys))
	for _, key := range keys {
		rec, err := p.Store.Load(key)
		switch {
		case errors.Is(err, cache.ErrNotFound):
			continue // removed meanwhile
		case err != nil:
			counts[[2]string{key.Network, "unreadable"}]++
			p.keepAll(fmt.Sprintf("unreadable record %s: %v", key, err))
			p.rep.Kept++
			p.rep.decide(key, ActKept, "unreadable record: "+err.Error())
			p.rep.Errors = append(p.rep.Errors, fmt.Sprintf("%s: %v", key, err))
			continue
		}
		counts[[2]string{key.Network, string(rec.Phase)}]++
		p.recs = append(p.recs, slim(rec))
	}
	p.rep.Records = len(keys)
	for k, n := range counts {
		p.rep.Counts = append(p.rep.Counts, RecordCount{Network: k[0], Phase: k[1], Count: n})
	}
	return nil
}

// slim drops from a complete record what the pass never reads of one (its
// steps' configs and results, its own result): phase one decides on its
// key, phase, times, netns and CNI_ARGS, and a reclaim reads the record
// afresh under its lock. Over 10,000 records that is most of the pass's
// live memory. Records of other phases are kept whole for their retries.
func slim(rec *cache.Record) *cache.Record {
	if rec.Phase != cache.PhaseComplete {
		return rec
	}
	rec.Steps, rec.Result, rec.PrevResult = nil, nil, nil
	return rec
}

// heldSince is when the teardown of a record that needs it began to fail:
// the oldest failing DEL, else its last change.
func heldSince(rec *cache.Record) time.Time {
	since := rec.Updated
	for _, s := range rec.Steps {
		if s.State == cache.StepDelFailed && !s.DelFailedSince.IsZero() && s.DelFailedSince.Before(since) {
			since = s.DelFailedSince
		}
	}
	return since
}

// decide applies rules 1 to 6 (phase one) to a complete record.
func (p *pass) decide(rec *cache.Record, alive map[string]struct{}) {
	key := rec.Key
	if !InScope(rec) {
		p.notCandidate(key, ActOutOfScope, "CNI_ARGS carry no "+infraKey+" equal to the container ID")
		return
	}
	p.rep.InScope++
	if _, ok := alive[key.ContainerID]; ok {
		p.notCandidate(key, ActAlive, "")
		return
	}
	if p.keep != "" {
		p.rep.Kept++
		p.rep.decide(key, ActKept, p.keep)
		return
	}
	if age := p.now.Sub(rec.Updated); age < p.grace() {
		p.notCandidate(key, ActRecent, fmt.Sprintf("changed %s ago, within the grace period %s", age.Round(time.Millisecond), p.grace()))
		return
	}
	if held, why := p.lockHeld(key); held {
		p.notCandidate(key, ActInFlight, why)
		return
	}
	ev, ok := p.netnsAllows(rec, len(alive) == 0, ActAlive)
	if !ok {
		return
	}
	p.rep.Candidates++
	version := Version(rec)
	m, ok := p.marks[key]
	switch {
	case !ok || m.Version != version:
		reason := "no sandbox listed"
		if ok {
			reason = "no sandbox listed; the record changed since its earlier mark"
		}
		if ev.Verdict == NSDead {
			reason += "; " + ev.Why
		}
		if p.Opts.DryRun {
			p.rep.decide(key, ActWouldMark, reason)
			return
		}
		if err := p.Marks.PutMark(Mark{Key: key, MarkedAt: p.now.UTC(), Version: version}); err != nil {
			p.rep.Errors = append(p.rep.Errors, err.Error())
			p.rep.decide(key, ActKept, err.Error())
			return
		}
		p.marks[key] = Mark{Key: key, MarkedAt: p.now.UTC(), Version: version}
		p.rep.Marked++
		p.rep.decide(key, ActMarked, reason)
	case p.now.Sub(m.MarkedAt) < p.grace():
		p.rep.decide(key, ActWaiting, fmt.Sprintf("marked %s ago, less than the grace period %s", p.now.Sub(m.MarkedAt).Round(time.Millisecond), p.grace()))
	default:
		p.due = append(p.due, rec)
	}
}

// notCandidate records a decision and clears the record's mark, if any.
func (p *pass) notCandidate(key cache.Key, a Action, reason string) {
	p.rep.decide(key, a, reason)
	p.clearMark(key)
}

func (p *pass) clearMark(key cache.Key) {
	if _, ok := p.marks[key]; !ok {
		return
	}
	if p.Opts.DryRun {
		return
	}
	if err := p.Marks.ClearMark(key); err != nil {
		p.rep.Errors = append(p.rep.Errors, err.Error())
		return
	}
	delete(p.marks, key)
}

// lockHeld reports whether key's lock is held, by taking it without waiting
// and releasing it at once.
func (p *pass) lockHeld(key cache.Key) (bool, string) {
	u, err := p.Store.TryLock(key, cache.Holder{PID: os.Getpid(), Verb: "RECONCILE", Since: p.now})
	if err != nil {
		return true, err.Error()
	}
	if err := u.Unlock(); err != nil {
		p.rep.Errors = append(p.rep.Errors, fmt.Sprintf("%s: releasing lock: %v", key, err))
	}
	return false, ""
}
