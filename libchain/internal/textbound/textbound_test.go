package textbound

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestBound(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"short", "oops", "oops"},
		{"exactly the limit", strings.Repeat("a", Max), strings.Repeat("a", Max)},
		{"one byte over", strings.Repeat("a", Max+1), strings.Repeat("a", Max) + "... [truncated 1 bytes]"},
		{"20 MiB", strings.Repeat("x", 20<<20), strings.Repeat("x", Max) + "... [truncated 20967424 bytes]"},
		// "é" is 2 bytes: the limit falls inside one, which is dropped whole.
		{"cut inside a rune", "a" + strings.Repeat("é", Max), "a" + strings.Repeat("é", (Max-1)/2) + "... [truncated 4098 bytes]"},
		// "€" is 3 bytes.
		{"cut inside a 3-byte rune", strings.Repeat("€", Max), strings.Repeat("€", Max/3) + "... [truncated 8193 bytes]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Bound(tt.in)
			assert.Equal(t, tt.want, got)
			assert.True(t, utf8.ValidString(got))
			assert.LessOrEqual(t, len(got), Max+len("... [truncated 12345678901 bytes]"))
		})
	}
}
