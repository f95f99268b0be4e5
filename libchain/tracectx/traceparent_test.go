package tracectx

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	traceHex = "4bf92f3577b34da6a3ce929d0e0e4736"
	spanHex  = "00f067aa0ba902b7"
)

var (
	traceID = TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	spanID  = SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
)

// TestParseTraceparentValid: the spec's examples and what a later version
// may look like parse to their trace, span and flags; version 00 is
// written back as it came.
func TestParseTraceparentValid(t *testing.T) {
	tests := []struct {
		name, in string
		flags    byte
		sampled  bool
	}{
		{"sampled", "00-" + traceHex + "-" + spanHex + "-01", 0x01, true},
		{"not sampled", "00-" + traceHex + "-" + spanHex + "-00", 0x00, false},
		{"random-trace-id flag", "00-" + traceHex + "-" + spanHex + "-03", 0x03, true},
		{"unknown flags kept", "00-" + traceHex + "-" + spanHex + "-fe", 0xfe, false},
		{"a later version, exact length", "01-" + traceHex + "-" + spanHex + "-01", 0x01, true},
		{"a later version, with more after a dash", "cc-" + traceHex + "-" + spanHex + "-01-what-the-future-holds", 0x01, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParseTraceparent(tt.in)
			require.NoError(t, err)
			assert.Equal(t, Parent{TraceID: traceID, SpanID: spanID, Flags: tt.flags}, p)
			assert.True(t, p.Valid())
			assert.Equal(t, tt.sampled, p.Sampled())
			assert.Equal(t, traceHex, p.TraceID.String())
			assert.Equal(t, spanHex, p.SpanID.String())
			want := "00" + tt.in[2:55]
			assert.Equal(t, want, p.String(), "written as version 00")
		})
	}
}

// TestParseTraceparentMalformed: every way Trace Context says a
// traceparent is invalid is an error wrapping ErrMalformed, and no valid
// Parent.
func TestParseTraceparentMalformed(t *testing.T) {
	valid := "00-" + traceHex + "-" + spanHex + "-01"
	tests := []struct {
		name, in string
	}{
		{"empty", ""},
		{"short", valid[:54]},
		{"version 00 too long", valid + "-00"},
		{"version 00 with trailing space", valid + " "},
		{"leading space", " " + valid},
		{"version ff", "ff" + valid[2:]},
		{"version uppercase", "0A" + valid[2:]},
		{"version not hex", "0g" + valid[2:]},
		{"later version without a dash after the flags", "01" + valid[2:] + "x"},
		{"trace-id uppercase", "00-" + strings.ToUpper(traceHex) + "-" + spanHex + "-01"},
		{"parent-id uppercase", "00-" + traceHex + "-" + strings.ToUpper(spanHex) + "-01"},
		{"flags uppercase", "00-" + traceHex + "-" + spanHex + "-0A"},
		{"trace-id not hex", "00-" + traceHex[:31] + "z-" + spanHex + "-01"},
		{"parent-id not hex", "00-" + traceHex + "-" + spanHex[:15] + "z-01"},
		{"flags not hex", "00-" + traceHex + "-" + spanHex + "-0x"},
		{"trace-id all zeros", "00-" + strings.Repeat("0", 32) + "-" + spanHex + "-01"},
		{"parent-id all zeros", "00-" + traceHex + "-" + strings.Repeat("0", 16) + "-01"},
		{"underscores for dashes", "00_" + traceHex + "_" + spanHex + "_01"},
		{"trace-id one short, parent-id one long", "00-" + traceHex[:31] + "-0" + spanHex + "-01"},
		{"a later version with all-zero trace-id", "01-" + strings.Repeat("0", 32) + "-" + spanHex + "-01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParseTraceparent(tt.in)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrMalformed)
			assert.False(t, p.Valid(), "no valid parent comes with an error")
			assert.Equal(t, strings.ToLower(err.Error()[:1]), err.Error()[:1], "errors are lowercase")
		})
	}
}

// TestZeroIDsAreNoText: the zero IDs write as "", so that a journal
// field holding one is omitted.
func TestZeroIDsAreNoText(t *testing.T) {
	assert.Empty(t, TraceID{}.String())
	assert.Empty(t, SpanID{}.String())
	assert.False(t, Parent{}.Valid())
	assert.False(t, Parent{TraceID: traceID}.Valid())
	assert.False(t, Parent{SpanID: spanID}.Valid())
}

// zeroThen reads n zero bytes, then from r.
func zeroThen(n int, r io.Reader) io.Reader {
	return io.MultiReader(bytes.NewReader(make([]byte, n)), r)
}

// TestNewSpanID: span IDs come from the reader, never all zero; a reader
// that fails, or gives nothing but zeros, is an error and no ID.
func TestNewSpanID(t *testing.T) {
	seq := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	tests := []struct {
		name    string
		r       io.Reader
		want    SpanID
		wantErr string
	}{
		{"from the reader", bytes.NewReader(seq), SpanID(seq), ""},
		{"zeros skipped", zeroThen(8, bytes.NewReader(seq)), SpanID(seq), ""},
		{"only zeros", bytes.NewReader(make([]byte, 64)), SpanID{}, "all zeros"},
		{"a failing reader", io.MultiReader(), SpanID{}, "reading a span ID: EOF"},
		{"a short reader", bytes.NewReader(seq[:3]), SpanID{}, "unexpected EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := NewSpanID(tt.r)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				assert.True(t, id.IsZero())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, id)
		})
	}
}

// TestNewSpanIDFromCryptoRand: with no reader, IDs come from crypto/rand:
// nonzero, and not the same twice in a thousand.
func TestNewSpanIDFromCryptoRand(t *testing.T) {
	seen := map[SpanID]bool{}
	for range 1000 {
		id, err := NewSpanID(nil)
		require.NoError(t, err)
		require.False(t, id.IsZero())
		require.False(t, seen[id], "a span ID repeated")
		seen[id] = true
	}
}

// FuzzParseTraceparent: whatever the input, the parser does not panic; an
// input it accepts has nonzero IDs, and its version-00 text parses back
// to the same Parent.
func FuzzParseTraceparent(f *testing.F) {
	f.Add("00-" + traceHex + "-" + spanHex + "-01")
	f.Add("ff-" + traceHex + "-" + spanHex + "-01")
	f.Add("01-" + traceHex + "-" + spanHex + "-01-x")
	f.Add("00-" + strings.Repeat("0", 32) + "-" + spanHex + "-01")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseTraceparent(s)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("%q: error %v does not wrap ErrMalformed", s, err)
			}
			return
		}
		if !p.Valid() {
			t.Fatalf("%q accepted with a zero ID", s)
		}
		back, err := ParseTraceparent(p.String())
		if err != nil || back != p {
			t.Fatalf("%q: %q parses back to %v, %v", s, p.String(), back, err)
		}
	})
}
