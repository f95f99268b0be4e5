// Package textbound bounds the text a delegate controls (its error message
// and details, its stderr in a message) wherever Catena keeps or repeats
// it: the executor's errors (libchain/invoke), the engine's errors,
// records and log lines, and the event journal.
package textbound

import (
	"fmt"
	"unicode/utf8"
)

// Max bounds every piece of text a delegate controls.
const Max = 4 << 10

// Bound returns s if it is at most Max bytes, else its first Max bytes or
// fewer, cut at a UTF-8 boundary, followed by a marker saying how many
// bytes were dropped.
func Bound(s string) string {
	return Cut(s, Max)
}

// Cut is Bound with a bound of n bytes (n >= 0).
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("... [truncated %d bytes]", len(s)-cut)
}
