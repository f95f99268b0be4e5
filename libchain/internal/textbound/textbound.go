package libchain

import (
	"fmt"
	"unicode/utf8"
)

// MaxText bounds every piece of text a delegate controls (its error message
// and details, its stderr in a message) wherever Catena keeps or repeats
// it: errors it returns and prints, records, the event journal, log lines.
const MaxText = 4 << 10

// BoundText returns s if it is at most MaxText bytes, else its first
// MaxText bytes or fewer, cut at a UTF-8 boundary, followed by a marker
// saying how many bytes were dropped.
func BoundText(s string) string {
	return cutText(s, MaxText)
}

// cutText is BoundText with a bound of n bytes (n >= 0).
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("... [truncated %d bytes]", len(s)-cut)
}
