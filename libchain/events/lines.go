package events

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
)

// line is one line of a journal file: where it starts, how many bytes it
// takes with its newline, and its text without the newline; the text of a
// line longer than the limit is nil and tooLong is set.
type line struct {
	offset, size int64
	text         []byte
	tooLong      bool
}

// scanLines calls fn with each non-empty line of r, which starts at
// offset in its file, and returns how many bytes of r it consumed. A line
// longer than max is passed as tooLong, without its text, and the rest of
// it is read and discarded, so memory stays bounded by max whatever r
// holds. A last line without a newline is a torn append or one still
// being written: with partial, it is passed like any other and consumed
// (a whole-file read); without, it is left for the next read and not
// counted in the bytes consumed (a tail). Empty lines are consumed and
// not passed. The line's text is valid only during fn.
func scanLines(r io.Reader, max int, offset int64, partial bool, fn func(line)) (int64, error) {
	br := bufio.NewReaderSize(r, max+1) // room for a line of max bytes and its newline
	var used int64
	cur := line{offset: offset}
	for {
		chunk, err := br.ReadSlice('\n')
		cur.size += int64(len(chunk))
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			cur.tooLong = true // the line goes on
			continue
		case err != nil && !errors.Is(err, io.EOF):
			return used, err
		case errors.Is(err, io.EOF) && (!partial || cur.size == 0):
			return used, nil // nothing left, or a partial line that waits
		}
		if text := bytes.TrimSuffix(chunk, []byte("\n")); cur.tooLong || len(text) > max {
			cur.tooLong = true
		} else {
			cur.text = text
		}
		if cur.tooLong || len(cur.text) > 0 {
			fn(cur)
		}
		used += cur.size
		if err != nil {
			return used, nil
		}
		cur = line{offset: offset + used}
	}
}

// decode reads a line as an operation, or says why it is not one: longer
// than MaxLine (which Append never writes: junk, or a line of an older
// Catena), not JSON (junk, a torn append), or JSON of another shape.
func decode(l line) (op Op, why string) {
	switch {
	case l.tooLong:
		return op, fmt.Sprintf("longer than %d bytes", MaxLine)
	case json.Unmarshal(l.text, &op) != nil:
		return op, "not the JSON of an operation"
	case op.Verb == "":
		return op, "not an operation (no verb)"
	}
	return op, ""
}

// Skipped is what a read skipped: how many lines were not an operation,
// and where the first one was and why; and, for a Tail, how many times the
// file last read could not be found again (Unfollowed), whose lines
// appended since the poll before are then not read.
type Skipped struct {
	// Unfollowed counts the files a Tail lost track of: rotated twice
	// between polls, or rewritten in place; it then read on from the start
	// of the files it found.
	Unfollowed int
	// UnfollowedPath is the journal whose file was lost.
	UnfollowedPath string
	Lines          int
	// The first line skipped: its file, offset, size (with its newline)
	// and why it is not an operation.
	Path   string
	Offset int64
	Size   int64
	Why    string
}

// add counts one line of the file at path that is not an operation.
func (s *Skipped) add(path string, l line, why string) {
	if s.Lines == 0 {
		s.Path, s.Offset, s.Size, s.Why = path, l.offset, l.size, why
	}
	s.Lines++
}

// unfollowed counts one file of the journal at path that a Tail lost.
func (s *Skipped) unfollowed(path string) {
	s.Unfollowed++
	s.UnfollowedPath = path
}

// Log logs one warning on log if anything was skipped: how many lines,
// and the first one's file, offset, size and why; or how many files a
// Tail could not follow. A nil log logs nothing.
func (s Skipped) Log(log *slog.Logger) {
	if s.Lines+s.Unfollowed == 0 || log == nil {
		return
	}
	if s.Unfollowed > 0 {
		log.Warn("event journal: the file last read was rotated away twice or rewritten: what it got since the last read is not read, and the journal is read on from the start of its files",
			"unfollowed", s.Unfollowed, "journal", s.UnfollowedPath, "lines", s.Lines,
			"first", s.Path, "offset", s.Offset, "bytes", s.Size, "why", s.Why)
		return
	}
	log.Warn("event journal: skipped lines that are not an operation", "lines", s.Lines,
		"first", s.Path, "offset", s.Offset, "bytes", s.Size, "why", s.Why)
}

// readOps reads the lines of r, the file at path from offset (scanLines),
// hands each operation to use and counts the other lines in skipped; it
// returns how many bytes it consumed.
func readOps(r io.Reader, path string, offset int64, partial bool, skipped *Skipped, use func(Op)) (int64, error) {
	return scanLines(r, MaxLine, offset, partial, func(l line) {
		op, why := decode(l)
		if why != "" {
			skipped.add(path, l, why)
			return
		}
		use(op)
	})
}
