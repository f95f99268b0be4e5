package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/afero"
	"github.com/spf13/cobra"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/cmd/internal/cli"
	"github.com/catena-cni/catena/libchain/events"
)

const (
	defaultTraceLast = 5
	// barWidth is the number of cells of a waterfall bar, which spans the
	// operation's duration.
	barWidth = 40
	// labelWidth is the width of a row's label ("ADD bridge (0)"); a
	// longer one is cut.
	labelWidth = 24
	// maxCallError and maxOpError bound the errors a waterfall prints, in
	// runes of their escaped text.
	maxCallError = 80
	maxOpError   = 200
	// maxAttachments bounds the attachments an ambiguous container's
	// error names (each cut to 120 runes).
	maxAttachments = 8
)

// What a step of a waterfall is, in traceStep.Kind.
const (
	stepLockWait = "lock-wait"
	stepCall     = "call"
)

// What the trace of an operation is, in traceOp.Trace.Kind.
const (
	// traceContinued: the operation continued its runtime's trace (or that
	// of the operation it ran inside).
	traceContinued = "continued"
	// traceRoot: the operation continued none; the agent exports it, when
	// its sampler asks, as the root of a trace of its own.
	traceRoot = "root"
)

// traceOutput is `catenactl trace`: an attachment's last operations from
// the event journal.
type traceOutput struct {
	Attachment string `json:"attachment"`
	// Matched counts the attachment's operations the journal holds (within
	// --since); Operations are the last --last of them, oldest first.
	Matched    int       `json:"matched"`
	Operations []traceOp `json:"operations"`
	// Skipped counts the journal lines that could not be read as an
	// operation, as stats does.
	Skipped int `json:"unreadableEventLines"`
}

// traceOp is one operation as a waterfall: its steps laid out from its
// start.
type traceOp struct {
	Verb      string        `json:"verb"`
	Start     time.Time     `json:"start"`
	Duration  time.Duration `json:"durationNs"`
	Outcome   string        `json:"outcome"`
	Error     string        `json:"error,omitempty"`
	Rollback  bool          `json:"rollback,omitempty"`
	Truncated bool          `json:"truncated,omitempty"`
	// Trace is the trace the operation belongs to; nil when it has none
	// (no span ID was journaled).
	Trace        *traceRef     `json:"trace,omitempty"`
	SpanID       string        `json:"spanID,omitempty"`
	ParentSpanID string        `json:"parentSpanID,omitempty"`
	Steps        []traceStep   `json:"steps"`
	Writes       time.Duration `json:"writesNs"`
	WriteCount   int           `json:"writes"`
}

// traceRef names an operation's trace: the one it continued, or the root
// trace the agent exports it under (events.Op.TraceOf).
type traceRef struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"`
	Sampled bool   `json:"sampled,omitempty"`
}

// traceStep is one row of a waterfall: the wait for the attachment's lock
// (from the operation's start) or one delegate call.
type traceStep struct {
	Kind     string        `json:"kind"`
	Offset   time.Duration `json:"startNs"`
	Duration time.Duration `json:"durationNs"`
	Index    *int          `json:"index,omitempty"`
	Type     string        `json:"type,omitempty"`
	Verb     string        `json:"verb,omitempty"`
	Error    string        `json:"error,omitempty"`
	SpanID   string        `json:"spanID,omitempty"`
	// Rollback marks a DEL that undid a failed ADD of the operation.
	Rollback bool `json:"rollback,omitempty"`
}

func (a *app) traceCmd() *cobra.Command {
	var ifname, network string
	var last int
	var since time.Duration
	cmd := &cobra.Command{
		Use:   "trace <container-id>",
		Short: "Show an attachment's last operations as a waterfall, from the event journal",
		Long: `Show the last --last operations of a container's attachment (ADD, DEL, CHECK,
GC, RECLAIM, ...) that the event journal (<cacheDir>/events/events.jsonl and
its rotated events.jsonl.1) holds, oldest first, each as a waterfall: a header
with the verb, the start (UTC), the total duration, the outcome and the trace,
then one row per step, from the operation's start: the wait for the
attachment's lock, then each delegate call (a rollback's DELs too) with its
start offset, duration, outcome and a bar of ` + strconv.Itoa(barWidth) + ` cells spanning the whole
operation; then the record's durable writes (how many, their total time).

The trace is the one the operation continued, from its runtime's TRACEPARENT
("continued", sampled or not), or else the root trace the agent exports the
operation under when its sampler asks ("root, if exported"), derived from the
operation's span ID: look either up in the tracing backend.

The attachment is the container's on every network and ifname, unless
--network or --ifname narrow it down; they must when the journal holds
operations of several of its attachments. Works on a record long gone: it
reads only the journal, which keeps its latest 4 to 8 MiB of operations.
Errors are escaped and cut to one line; --json prints them whole.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if last < 1 {
				return cli.Usagef("--last must be at least 1, not %d", last)
			}
			if since < 0 {
				return cli.Usagef("--since must not be negative, not %s", since)
			}
			out, err := a.loadTrace(args[0], network, ifname, last, since)
			if err != nil {
				return err
			}
			if a.json {
				return writeJSON(a.stdout, out)
			}
			return printTrace(a.stdout, out)
		},
	}
	f := cmd.Flags()
	f.StringVar(&ifname, "ifname", "", "the attachment with this interface name")
	f.StringVar(&network, "network", "", "the attachment on this network")
	f.IntVar(&last, "last", defaultTraceLast, "show this many operations, the latest")
	f.DurationVar(&since, "since", 0, "only the operations that started within this long before now (default: all the journal holds)")
	return cmd
}

// loadTrace reads the event journal and returns the last operations of the
// one attachment of container that network and ifname (when not "")
// select.
func (a *app) loadTrace(container, network, ifname string, last int, since time.Duration) (*traceOutput, error) {
	cacheDir, err := a.resolveCacheDir()
	if err != nil {
		return nil, err
	}
	var from time.Time
	if since > 0 {
		from = a.now().Add(-since)
	}
	ops, skipped, err := events.Read(afero.NewOsFs(), cacheDir, from)
	if err != nil {
		return nil, err
	}
	var matched []events.Op
	var keys []string
	for _, op := range ops {
		k, ok := attachmentKey(op.Attachment)
		if !ok || k.ContainerID != container || (network != "" && k.Network != network) || (ifname != "" && k.IfName != ifname) {
			continue
		}
		matched = append(matched, op)
		if !slices.Contains(keys, op.Attachment) {
			keys = append(keys, op.Attachment)
		}
	}
	switch len(keys) {
	case 0:
		within := ""
		if since > 0 {
			within = fmt.Sprintf(" that started within the last %s", since)
		}
		return nil, fmt.Errorf("no operation of container %q%s%s in the event journal %s (it keeps only its latest 4 to 8 MiB)",
			container, narrowing(network, ifname), within, events.Path(cacheDir))
	case 1:
	default:
		slices.Sort(keys)
		var names []string
		for _, k := range keys[:min(len(keys), maxAttachments)] {
			names = append(names, cut(k, 120))
		}
		more := ""
		if len(keys) > maxAttachments {
			more = fmt.Sprintf(" and %d more", len(keys)-maxAttachments)
		}
		return nil, cli.Usagef("the event journal holds operations of %d attachments of container %q: pass --network or --ifname (one of: %s%s)",
			len(keys), container, strings.Join(names, ", "), more)
	}
	// The journal holds each operation when it ended: ordered by start, a
	// waterfall reads as the operations ran.
	slices.SortStableFunc(matched, func(x, y events.Op) int { return x.Start.Compare(y.Start) })
	out := &traceOutput{Attachment: keys[0], Matched: len(matched), Operations: []traceOp{}, Skipped: skipped.Lines}
	for _, op := range matched[max(len(matched)-last, 0):] {
		out.Operations = append(out.Operations, traceOpOf(op))
	}
	return out, nil
}

// attachmentKey parses an Op's Attachment, "network/container/ifname"
// (cache.Key.String; no part may hold a slash).
func attachmentKey(s string) (cache.Key, bool) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return cache.Key{}, false
	}
	return cache.Key{Network: parts[0], ContainerID: parts[1], IfName: parts[2]}, true
}

// traceOpOf lays op out as a waterfall: its lock wait, from its start,
// then its calls in the order they were made.
func traceOpOf(op events.Op) traceOp {
	t := traceOp{
		Verb: op.Verb, Start: op.Start.UTC(), Duration: op.Duration, Outcome: op.Outcome, Error: op.Error,
		Rollback: op.Rollback, Truncated: op.Truncated, SpanID: op.SpanID, ParentSpanID: op.ParentSpanID,
		Writes: op.Writes, WriteCount: op.WriteCount,
		Steps: []traceStep{{Kind: stepLockWait, Duration: op.LockWait}},
	}
	switch id, continued := op.TraceOf(); {
	case continued:
		t.Trace = &traceRef{ID: id, Kind: traceContinued, Sampled: op.Sampled}
	case id != "":
		t.Trace = &traceRef{ID: id, Kind: traceRoot}
	}
	failedAdd := false
	for _, c := range op.Calls {
		index := c.Index
		s := traceStep{Kind: stepCall, Offset: c.StartOffset, Duration: c.Duration, Index: &index,
			Type: c.Type, Verb: c.Verb, Error: c.Error, SpanID: c.SpanID}
		// A rollback's DELs come after the ADD that failed.
		s.Rollback = op.Rollback && failedAdd && c.Verb == "DEL"
		failedAdd = failedAdd || (c.Verb == "ADD" && c.Error != "")
		t.Steps = append(t.Steps, s)
	}
	return t
}

// printTrace writes out as text: a line naming the attachment, then each
// operation's waterfall.
func printTrace(w io.Writer, out *traceOutput) error {
	p := &printer{w: w}
	p.printf("%s: the last %d of %d operation(s) in the event journal\n", cli.Printable(out.Attachment), len(out.Operations), out.Matched)
	if out.Skipped > 0 {
		p.printf("%d unreadable event line(s) skipped\n", out.Skipped)
	}
	for _, op := range out.Operations {
		p.printf("\n")
		printWaterfall(p, op)
	}
	return p.err()
}

// printWaterfall writes one operation: its header, a row per step, its
// record writes and its error. Every text from the journal is escaped and
// cut, so that each line has a bounded width and its columns stay fixed.
func printWaterfall(p *printer, op traceOp) {
	outcome := cut(cli.Printable(op.Outcome), 16)
	if op.Rollback {
		outcome += ", rolled back"
	}
	p.printf("%-7s  %s  total %s  %s  %s\n", cut(cli.Printable(op.Verb), 12), op.Start.Format("2006-01-02T15:04:05.000Z07:00"),
		humanDuration(max(op.Duration, 0)), outcome, traceLabel(op.Trace))
	if op.Truncated {
		p.printf("  (the journal cut this operation's texts or dropped its calls to fit a line)\n")
	}
	scale := waterfallScale(op)
	for _, s := range op.Steps {
		label, result := "lock wait", ""
		if s.Kind == stepCall {
			label = fmt.Sprintf("%s %s (%d)", cli.Printable(s.Verb), cli.Printable(s.Type), *s.Index)
			result = "ok"
			if s.Error != "" {
				result = "error: " + cut(cli.Printable(s.Error), maxCallError)
			}
			if s.Rollback {
				result += ", rollback"
			}
		}
		line := fmt.Sprintf("  %9s %9s  %-*s  [%s]", "+"+humanDuration(max(s.Offset, 0)), humanDuration(max(s.Duration, 0)),
			labelWidth, cut(label, labelWidth), bar(s.Offset, s.Duration, scale))
		if result != "" {
			line += "  " + result
		}
		p.printf("%s\n", line)
	}
	if op.WriteCount > 0 || op.Writes > 0 {
		p.printf("  writes %d, %s\n", op.WriteCount, humanDuration(op.Writes))
	}
	if op.Error != "" {
		p.printf("  error: %s\n", cut(cli.Printable(op.Error), maxOpError))
	}
}

// traceLabel names an operation's trace in its header.
func traceLabel(t *traceRef) string {
	switch {
	case t == nil:
		return "trace -"
	case t.Kind == traceRoot:
		return "trace " + cut(cli.Printable(t.ID), 32) + " (root, if exported)"
	case t.Sampled:
		return "trace " + cut(cli.Printable(t.ID), 32) + " (continued, sampled)"
	}
	return "trace " + cut(cli.Printable(t.ID), 32) + " (continued, unsampled)"
}

// waterfallScale is the time a bar spans: the operation's duration, or
// longer if a step ends after it (a clock step, a hand-edited journal),
// so that every step fits.
func waterfallScale(op traceOp) float64 {
	scale := float64(op.Duration)
	for _, s := range op.Steps {
		scale = math.Max(scale, float64(max(s.Offset, 0))+float64(max(s.Duration, 0)))
	}
	return scale
}

// bar renders a step as barWidth cells, '=' where it ran: the cells from
// its start to its end on a scale of barWidth cells for scale, at least
// one for a step that took any time, none for one that took none.
func bar(offset, d time.Duration, scale float64) string {
	cells := []byte(strings.Repeat(" ", barWidth))
	if d <= 0 {
		return string(cells)
	}
	from, to := 0, barWidth
	if scale > 0 {
		off := float64(max(offset, 0))
		from = int(math.Floor(off / scale * barWidth))
		to = int(math.Ceil((off + float64(d)) / scale * barWidth))
	}
	from = min(max(from, 0), barWidth-1)
	to = min(max(to, from+1), barWidth)
	for i := from; i < to; i++ {
		cells[i] = '='
	}
	return string(cells)
}

// cut returns s cut to n runes, its last three "..." when it was longer.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:max(n-3, 0)]) + "..."
}
