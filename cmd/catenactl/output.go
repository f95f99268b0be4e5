package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/catena-cni/catena/cmd/internal/cli"
)

// writeJSON prints v as indented JSON. encoding/json escapes the C0
// control characters and replaces invalid UTF-8 in strings, but passes DEL,
// the C1 controls and the bidi format characters raw (and a
// json.RawMessage's bytes as they are): those are escaped too, so that JSON
// output is as safe on a terminal as text output.
func writeJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	if _, err := w.Write(cli.EscapeJSON(buf.Bytes())); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}

// table writes aligned columns, one row per call, header first. A write
// error is kept and returned by flush.
type table struct {
	tw  *tabwriter.Writer
	err error
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
	t.row(header...)
	return t
}

// row writes one row. Every cell is escaped (see printable), so that a tab
// or newline inside it cannot break the columns and whatever a record holds
// reaches the terminal as text.
func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = cli.Printable(c)
	}
	if t.err == nil {
		_, t.err = fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
	}
}

func (t *table) flush() error {
	err := t.err
	if err == nil {
		err = t.tw.Flush()
	}
	if err != nil {
		return fmt.Errorf("writing table: %w", err)
	}
	return nil
}

// printer writes lines to w and keeps the first write error, which err
// returns: what a command prints after a failed write is dropped, and the
// command fails rather than leave its output cut short.
type printer struct {
	w       io.Writer
	lastErr error
}

func (p *printer) printf(format string, args ...any) {
	if p.lastErr == nil {
		_, p.lastErr = fmt.Fprintf(p.w, format, args...)
	}
}

func (p *printer) err() error {
	if p.lastErr != nil {
		return fmt.Errorf("writing output: %w", p.lastErr)
	}
	return nil
}

// humanAge renders an age as kubectl does: 45s, 12m, 5h, 3d.
func humanAge(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// humanDuration renders a latency with a precision that suits its size.
func humanDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(10 * time.Millisecond).String()
}

// orDash renders an empty cell as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// timestamp renders a time in UTC, or "-" when unset.
func timestamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}
