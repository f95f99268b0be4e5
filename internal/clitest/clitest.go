package clitest

import (
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// AssertTerminalSafe fails if out holds anything a terminal could act on:
// invalid UTF-8, a control character other than newline, or a bidi
// override.
func AssertTerminalSafe(t require.TestingT, out, what string) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	require.True(t, utf8.ValidString(out), "%s holds invalid UTF-8: %q", what, out)
	for i, r := range out {
		if (unicode.IsControl(r) && r != '\n') || r == '\u202e' {
			assert.Failf(t, "raw control character", "%s holds %U at byte %d: %q", what, r, i, out)
			return
		}
	}
}
