package cache

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// PendingNote is what a pending-teardown marker says: when the record's
// teardown is next due, and how many teardown attempts have failed so far
// (what the backoff grows with). It is a hint: the record is the truth.
type PendingNote struct {
	Due      time.Time
	Attempts int
}

// Pending is one noted attachment and its note.
type Pending struct {
	Key  Key
	Note PendingNote
	// Bad says why the marker could not be read as a note; Note is then
	// due at once.
	Bad error
}

// A marker holds one line, "v1 <due, Unix nanoseconds> <attempts>\n". An
// empty marker (a rewrite that a crash cut short after its truncation) is
// due at once with no attempts.
const (
	noteVersion = "v1"
	// maxNoteSize bounds what is read of a marker: a valid line is at most
	// 2+1+19+1+7+1 bytes.
	maxNoteSize = 64
	// maxNoteAttempts bounds the attempt count: past it the backoff is
	// long capped anyway.
	maxNoteAttempts = 1_000_000
)

var errBadNote = errors.New("malformed pending-teardown note")

// EncodeNote renders a note as a marker's content. A due time before the
// Unix epoch is written as the epoch (due at once), one past 2262 as 2262;
// attempts are clamped to [0, maxNoteAttempts].
func EncodeNote(n PendingNote) []byte {
	var due int64
	switch last := time.Unix(0, math.MaxInt64); {
	case n.Due.Before(time.Unix(0, 0)):
	case n.Due.After(last):
		due = math.MaxInt64
	default:
		due = n.Due.UnixNano()
	}
	return fmt.Appendf(nil, "%s %d %d\n", noteVersion, due, min(max(n.Attempts, 0), maxNoteAttempts))
}

// ParseNote reads a marker's content. Empty content is a note of an earlier
// build: due at once (the epoch), no attempts. Anything but exactly one
// well-formed line is an error; callers treat that as due at once too, and
// the next failed attempt rewrites it.
func ParseNote(data []byte) (PendingNote, error) {
	epoch := dueAtOnce()
	if len(data) == 0 {
		return epoch, nil
	}
	if len(data) > maxNoteSize {
		return epoch, fmt.Errorf("%w: %d bytes", errBadNote, len(data))
	}
	line, ok := bytes.CutSuffix(data, []byte("\n"))
	if !ok {
		return epoch, fmt.Errorf("%w: no final newline", errBadNote)
	}
	fields := bytes.Split(line, []byte(" "))
	if len(fields) != 3 || string(fields[0]) != noteVersion {
		return epoch, fmt.Errorf("%w: want %q, due and attempts", errBadNote, noteVersion)
	}
	due, err := parseDecimal(fields[1], math.MaxInt64)
	if err != nil {
		return epoch, fmt.Errorf("%w: due: %w", errBadNote, err)
	}
	attempts, err := parseDecimal(fields[2], maxNoteAttempts)
	if err != nil {
		return epoch, fmt.Errorf("%w: attempts: %w", errBadNote, err)
	}
	return PendingNote{Due: time.Unix(0, int64(due)).UTC(), Attempts: int(attempts)}, nil
}

// dueAtOnce is the note of a marker without one: due since the epoch.
func dueAtOnce() PendingNote {
	return PendingNote{Due: time.Unix(0, 0).UTC()}
}

// parseDecimal accepts only ASCII digits (no sign, no space, no
// underscore), at most limit.
func parseDecimal(b []byte, limit uint64) (uint64, error) {
	if len(b) == 0 || len(b) > 20 {
		return 0, fmt.Errorf("%q is not a decimal number", b)
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q is not a decimal number", b)
		}
	}
	v, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil || v > limit {
		return 0, fmt.Errorf("%q is out of range", b)
	}
	return v, nil
}
