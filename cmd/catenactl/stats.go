package main

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/afero"
	"github.com/spf13/cobra"

	"github.com/catena-cni/catena/cmd/internal/cli"
	"github.com/catena-cni/catena/libchain/events"
)

const defaultWindow = time.Hour

// stats is the event journal summarised over a window.
type stats struct {
	Since         time.Time   `json:"since"`
	Until         time.Time   `json:"until"`
	WindowSeconds float64     `json:"windowSeconds"`
	Operations    []opStats   `json:"operations"`
	Delegates     []callStats `json:"delegates"`
	// Skipped counts the journal lines that could not be read as an
	// operation (too long, not JSON, junk, a torn last line), in or out
	// of the window.
	Skipped int `json:"unreadableEventLines"`
}

// opStats summarises the operations of one verb.
type opStats struct {
	Verb          string        `json:"verb"`
	Count         int           `json:"count"`
	Failures      int           `json:"failures"`
	Rollbacks     int           `json:"rollbacks"`
	DurationP50   time.Duration `json:"durationP50Ns"`
	DurationP95   time.Duration `json:"durationP95Ns"`
	DurationSum   time.Duration `json:"durationSumNs"`
	LockWaitP50   time.Duration `json:"lockWaitP50Ns"`
	LockWaitP95   time.Duration `json:"lockWaitP95Ns"`
	LockWaitMax   time.Duration `json:"lockWaitMaxNs"`
	LockWaitSum   time.Duration `json:"lockWaitSumNs"`
	durations     []time.Duration
	lockWaitTimes []time.Duration
}

// callStats summarises the calls of one verb to one delegate.
type callStats struct {
	Index       int           `json:"index"`
	Type        string        `json:"type"`
	Verb        string        `json:"verb"`
	Calls       int           `json:"calls"`
	Failures    int           `json:"failures"`
	P50         time.Duration `json:"p50Ns"`
	P95         time.Duration `json:"p95Ns"`
	DurationSum time.Duration `json:"durationSumNs"`
	durations   []time.Duration
}

// windowFlag registers --window on cmd.
func windowFlag(cmd *cobra.Command, window *time.Duration) {
	cmd.Flags().DurationVar(window, "window", defaultWindow, "summarise the operations that started within this long before now")
}

// loadStats reads the event journal of the cache dir and summarises the
// operations that started within window before now.
func (a *app) loadStats(window time.Duration) (*stats, error) {
	if window <= 0 {
		return nil, cli.Usagef("--window must be positive, not %s", window)
	}
	cacheDir, err := a.resolveCacheDir()
	if err != nil {
		return nil, err
	}
	now := a.now()
	ops, skipped, err := events.Read(afero.NewOsFs(), cacheDir, now.Add(-window))
	if err != nil {
		return nil, err
	}
	s := summarise(ops, now.Add(-window), now)
	s.Skipped = skipped.Lines
	return s, nil
}

// summarise aggregates ops by verb and by (delegate, verb).
func summarise(ops []events.Op, since, until time.Time) *stats {
	byVerb := map[string]*opStats{}
	type callKey struct {
		index     int
		typ, verb string
	}
	byCall := map[callKey]*callStats{}
	for _, op := range ops {
		o := byVerb[op.Verb]
		if o == nil {
			o = &opStats{Verb: op.Verb}
			byVerb[op.Verb] = o
		}
		o.Count++
		if op.Outcome != "ok" {
			o.Failures++
		}
		if op.Rollback {
			o.Rollbacks++
		}
		o.durations = append(o.durations, op.Duration)
		o.lockWaitTimes = append(o.lockWaitTimes, op.LockWait)
		for _, c := range op.Calls {
			k := callKey{c.Index, c.Type, c.Verb}
			cs := byCall[k]
			if cs == nil {
				cs = &callStats{Index: c.Index, Type: c.Type, Verb: c.Verb}
				byCall[k] = cs
			}
			cs.Calls++
			if c.Error != "" {
				cs.Failures++
			}
			cs.durations = append(cs.durations, c.Duration)
		}
	}
	s := &stats{Since: since.UTC(), Until: until.UTC(), WindowSeconds: until.Sub(since).Seconds(),
		Operations: []opStats{}, Delegates: []callStats{}}
	for _, o := range byVerb {
		o.DurationP50, o.DurationP95, o.DurationSum = quantile(o.durations, 0.5), quantile(o.durations, 0.95), sum(o.durations)
		o.LockWaitP50, o.LockWaitP95 = quantile(o.lockWaitTimes, 0.5), quantile(o.lockWaitTimes, 0.95)
		o.LockWaitMax, o.LockWaitSum = quantile(o.lockWaitTimes, 1), sum(o.lockWaitTimes)
		s.Operations = append(s.Operations, *o)
	}
	for _, c := range byCall {
		c.P50, c.P95, c.DurationSum = quantile(c.durations, 0.5), quantile(c.durations, 0.95), sum(c.durations)
		s.Delegates = append(s.Delegates, *c)
	}
	slices.SortFunc(s.Operations, func(a, b opStats) int { return cmp.Compare(a.Verb, b.Verb) })
	slices.SortFunc(s.Delegates, func(a, b callStats) int {
		return cmp.Or(cmp.Compare(a.Index, b.Index), cmp.Compare(a.Type, b.Type), cmp.Compare(a.Verb, b.Verb))
	})
	return s
}

// quantile is the nearest-rank q-quantile of ds (0 for none); it sorts ds.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	rank := int(math.Ceil(q*float64(len(ds)))) - 1
	return ds[min(max(rank, 0), len(ds)-1)]
}

func sum(ds []time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t
}

func (a *app) statsCmd() *cobra.Command {
	var window time.Duration
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Summarise the event journal: per-delegate latency, failures, rollbacks, lock waits",
		Long: `Summarise the operations that catena (and catenactl gc/repair) appended to the
event journal (<cacheDir>/events/events.jsonl and its rotated events.jsonl.1)
that started within --window:
  per verb:      operations, failures, ADDs rolled back, duration p50/p95, and
                 the wait for the attachment's lock p50/p95/max;
  per delegate:  calls of each verb, failures, latency p50/p95.
Percentiles are nearest-rank. Only what the journal still holds is counted:
it keeps between 4 and 8 MiB of operations. A line that cannot be read as an
operation (longer than 64 KiB, which catena never writes, not JSON, a torn
last line) is skipped and counted: "N unreadable event line(s) skipped".`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := a.loadStats(window)
			if err != nil {
				return err
			}
			if a.json {
				return writeJSON(a.stdout, s)
			}
			return printStats(a, s, window)
		},
	}
	windowFlag(cmd, &window)
	return cmd
}

func printStats(a *app, s *stats, window time.Duration) error {
	n := 0
	for _, o := range s.Operations {
		n += o.Count
	}
	p := &printer{w: a.stdout}
	p.printf("%d operation(s) in the last %s (since %s)\n", n, window, timestamp(s.Since))
	if s.Skipped > 0 {
		p.printf("%d unreadable event line(s) skipped\n", s.Skipped)
	}
	p.printf("\n")
	if err := p.err(); err != nil || n == 0 {
		return err
	}
	ot := newTable(a.stdout, "VERB", "OPS", "FAILED", "ROLLBACKS", "P50", "P95", "LOCK-WAIT-P50", "LOCK-WAIT-P95", "LOCK-WAIT-MAX")
	for _, o := range s.Operations {
		ot.row(o.Verb, strconv.Itoa(o.Count), strconv.Itoa(o.Failures), strconv.Itoa(o.Rollbacks),
			humanDuration(o.DurationP50), humanDuration(o.DurationP95),
			humanDuration(o.LockWaitP50), humanDuration(o.LockWaitP95), humanDuration(o.LockWaitMax))
	}
	if err := ot.flush(); err != nil {
		return err
	}
	if len(s.Delegates) == 0 {
		return nil
	}
	p.printf("\n")
	if err := p.err(); err != nil {
		return err
	}
	dt := newTable(a.stdout, "DELEGATE", "VERB", "CALLS", "FAILED", "P50", "P95")
	for _, c := range s.Delegates {
		dt.row(fmt.Sprintf("%d (%s)", c.Index, c.Type), c.Verb, strconv.Itoa(c.Calls), strconv.Itoa(c.Failures),
			humanDuration(c.P50), humanDuration(c.P95))
	}
	return dt.flush()
}
