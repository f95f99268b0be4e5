package tracectx

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// TraceID is a W3C trace-id: 16 bytes, all zero in no valid trace.
type TraceID [16]byte

// SpanID is a W3C parent-id, the ID of a span: 8 bytes, all zero in no
// valid span.
type SpanID [8]byte

// IsZero reports whether id is all zero: no trace.
func (id TraceID) IsZero() bool { return id == TraceID{} }

// String is id in lowercase hex, 32 digits; "" for the zero ID, so that
// a field holding it can be omitted.
func (id TraceID) String() string {
	if id.IsZero() {
		return ""
	}
	return hex.EncodeToString(id[:])
}

// IsZero reports whether id is all zero: no span.
func (id SpanID) IsZero() bool { return id == SpanID{} }

// String is id in lowercase hex, 16 digits; "" for the zero ID, so that a
// field holding it can be omitted.
func (id SpanID) String() string {
	if id.IsZero() {
		return ""
	}
	return hex.EncodeToString(id[:])
}

// FlagSampled is the sampled bit of the trace-flags: the caller may have
// recorded its span.
const FlagSampled = 0x01

// Parent is a W3C traceparent: the trace, the span of the caller (its
// parent-id) and the trace-flags.
type Parent struct {
	TraceID TraceID
	SpanID  SpanID
	Flags   byte
}

// Valid reports whether p names a trace and a span: neither ID is zero.
// The zero Parent is no trace.
func (p Parent) Valid() bool { return !p.TraceID.IsZero() && !p.SpanID.IsZero() }

// Sampled reports whether p's sampled flag is set.
func (p Parent) Sampled() bool { return p.Flags&FlagSampled != 0 }

// traceparentLen is the length of a version-00 traceparent:
// "00-" 32 hex "-" 16 hex "-" 2 hex.
const traceparentLen = 55

// String is p as a version-00 traceparent, the only version Catena
// writes (a later version it was given is passed on as 00).
func (p Parent) String() string { return string(p.AppendText(make([]byte, 0, traceparentLen))) }

// AppendText appends p as a version-00 traceparent to b.
func (p Parent) AppendText(b []byte) []byte {
	b = append(b, "00-"...)
	b = hex.AppendEncode(b, p.TraceID[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, p.SpanID[:])
	b = append(b, '-')
	return hex.AppendEncode(b, []byte{p.Flags})
}

// ErrMalformed is what every parse error of this package wraps.
var ErrMalformed = errors.New("malformed")

// ParseTraceparent parses a W3C traceparent strictly, as Trace Context
// (level 2, section 3.2) says: version, trace-id, parent-id and
// trace-flags, lowercase hex only, separated by "-". Version ff is
// invalid; version 00 is exactly 55 characters; a later version is read
// by the version-00 layout, and may go on only after a "-" following the
// flags. A trace-id or parent-id of all zeros is invalid. Nothing is
// trimmed. Every error wraps ErrMalformed.
func ParseTraceparent(s string) (Parent, error) {
	var p, none Parent
	if len(s) < traceparentLen {
		return none, fmt.Errorf("%w: %d characters, not %d", ErrMalformed, len(s), traceparentLen)
	}
	var ver [1]byte
	if !decodeLowerHex(ver[:], s[0:2]) {
		return none, fmt.Errorf("%w: version %q is not two lowercase hex digits", ErrMalformed, s[0:2])
	}
	switch {
	case ver[0] == 0xff:
		return none, fmt.Errorf("%w: version ff is invalid", ErrMalformed)
	case ver[0] == 0 && len(s) != traceparentLen:
		return none, fmt.Errorf("%w: version 00 with %d characters, not %d", ErrMalformed, len(s), traceparentLen)
	case len(s) > traceparentLen && s[traceparentLen] != '-':
		return none, fmt.Errorf("%w: version %s: no \"-\" after the trace-flags", ErrMalformed, s[0:2])
	}
	if s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return none, fmt.Errorf("%w: fields not separated by \"-\" at 2, 35 and 52", ErrMalformed)
	}
	if !decodeLowerHex(p.TraceID[:], s[3:35]) {
		return none, fmt.Errorf("%w: trace-id is not 32 lowercase hex digits", ErrMalformed)
	}
	if !decodeLowerHex(p.SpanID[:], s[36:52]) {
		return none, fmt.Errorf("%w: parent-id is not 16 lowercase hex digits", ErrMalformed)
	}
	var flags [1]byte
	if !decodeLowerHex(flags[:], s[53:55]) {
		return none, fmt.Errorf("%w: trace-flags are not two lowercase hex digits", ErrMalformed)
	}
	p.Flags = flags[0]
	switch {
	case p.TraceID.IsZero():
		return none, fmt.Errorf("%w: trace-id is all zeros", ErrMalformed)
	case p.SpanID.IsZero():
		return none, fmt.Errorf("%w: parent-id is all zeros", ErrMalformed)
	}
	return p, nil
}

// decodeLowerHex decodes src, 2*len(dst) lowercase hex digits, into dst;
// false for anything else (uppercase included, which encoding/hex takes).
func decodeLowerHex(dst []byte, src string) bool {
	if len(src) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := lowerHex(src[2*i])
		lo, ok2 := lowerHex(src[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func lowerHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// spanIDReads bounds the reads of NewSpanID: eight bytes of
// crypto/rand are all zero once in 2^64.
const spanIDReads = 4

// NewSpanID reads a span ID from r, crypto/rand.Reader when nil, reading
// again while it is all zero (a reader that keeps giving zeros is an
// error).
func NewSpanID(r io.Reader) (SpanID, error) {
	var id SpanID
	if r == nil {
		r = rand.Reader
	}
	for range spanIDReads {
		if _, err := io.ReadFull(r, id[:]); err != nil {
			return SpanID{}, fmt.Errorf("reading a span ID: %w", err)
		}
		if !id.IsZero() {
			return id, nil
		}
	}
	return SpanID{}, fmt.Errorf("reading a span ID: %d reads gave all zeros", spanIDReads)
}
