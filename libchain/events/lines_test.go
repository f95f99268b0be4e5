package events

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestScanLines: the line scanner of both readers passes each non-empty
// line with where it starts and how many bytes it takes; a line over the
// bound is passed as too long, without its text; a last line without a
// newline is a line for a whole-file read and waits, unconsumed, for a
// tail.
func TestScanLines(t *testing.T) {
	type got struct {
		offset, size int64
		text         string
		tooLong      bool
	}
	const at = 100 // where the bytes scanned start in their file
	tests := []struct {
		name string
		in   string
		want []got // read whole
		torn int   // bytes of a last line without a newline
	}{
		{"empty", "", nil, 0},
		{"lines", "a\nbb\n", []got{{at, 2, "a", false}, {at + 2, 3, "bb", false}}, 0},
		{"empty lines ignored", "\n\na\n\n", []got{{at + 2, 2, "a", false}}, 0},
		{"torn last line", "a\nbc", []got{{at, 2, "a", false}, {at + 2, 2, "bc", false}}, 2},
		{"exactly max", "12345678\nx\n", []got{{at, 9, "12345678", false}, {at + 9, 2, "x", false}}, 0},
		{"one over max, then on", "123456789\nx\n", []got{{at, 10, "", true}, {at + 10, 2, "x", false}}, 0},
		{"far over max, then on", strings.Repeat("z", 100) + "\nx\n", []got{{at, 101, "", true}, {at + 101, 2, "x", false}}, 0},
		{"long torn last line", "a\n" + strings.Repeat("y", 100), []got{{at, 2, "a", false}, {at + 2, 100, "", true}}, 100},
		{"binary", "\x00\xff\x1b\r\n", []got{{at, 5, "\x00\xff\x1b\r", false}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			readers := map[string]func() io.Reader{
				"whole":    func() io.Reader { return strings.NewReader(tt.in) },
				"one byte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(tt.in)) },
			}
			for name, r := range readers {
				for _, partial := range []bool{true, false} {
					var lines []got
					n, err := scanLines(r(), 8, at, partial, func(l line) {
						lines = append(lines, got{l.offset, l.size, string(l.text), l.tooLong})
					})
					require.NoError(t, err)
					want, used := tt.want, int64(len(tt.in))
					if !partial && tt.torn > 0 {
						want, used = want[:len(want)-1], used-int64(tt.torn)
					}
					assert.Equal(t, want, lines, "%s, partial %v", name, partial)
					assert.Equal(t, used, n, "%s, partial %v: bytes consumed", name, partial)
				}
			}
		})
	}
	t.Run("read error", func(t *testing.T) {
		_, err := scanLines(iotest.TimeoutReader(strings.NewReader(strings.Repeat("z", 70<<10))), 8, 0, true, func(line) {})
		assert.ErrorIs(t, err, iotest.ErrTimeout)
	})
}
