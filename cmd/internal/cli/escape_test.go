package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/catena-cni/catena/internal/clitest"
)

func TestPrintable(t *testing.T) {
	tests := []struct{ in, want, wantLines string }{
		{"plain text: ok (ünïcode €)", "plain text: ok (ünïcode €)", "plain text: ok (ünïcode €)"},
		{"a\tb\nc\rd", `a\tb\nc\rd`, "a\tb\nc\\rd"},
		{"\x1b[2J\x00\x07\x7f", `\x1b[2J\x00\x07\x7f`, `\x1b[2J\x00\x07\x7f`},
		{"\u009b31m \u0085", `\u009b31m \u0085`, `\u009b31m \u0085`},
		{"\u202eevil\u2066x\u2069\u200f\u2028", `\u202eevil\u2066x\u2069\u200f\u2028`, `\u202eevil\u2066x\u2069\u200f\u2028`},
		{"bad \xff\xfe utf8 \xe2\x82", `bad \xff\xfe utf8 \xe2\x82`, `bad \xff\xfe utf8 \xe2\x82`},
		{"a real \uFFFD stays", "a real \uFFFD stays", "a real \uFFFD stays"},
		{`a \ backslash`, `a \ backslash`, `a \ backslash`},
		{"", "", ""},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Printable(tt.in), "Printable(%q)", tt.in)
		assert.Equal(t, tt.wantLines, PrintableLines(tt.in), "PrintableLines(%q)", tt.in)
		clitest.AssertTerminalSafe(t, Printable(tt.in), "Printable")
	}
}
