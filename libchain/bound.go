package libchain

import "github.com/catena-cni/catena/libchain/internal/textbound"

// MaxText bounds every piece of text a delegate controls (its error message
// and details, its stderr in a message) wherever Catena keeps or repeats
// it: errors it returns and prints, records, the event journal, log lines.
const MaxText = textbound.Max

// BoundText returns s if it is at most MaxText bytes, else its first
// MaxText bytes or fewer, cut at a UTF-8 boundary, followed by a marker
// saying how many bytes were dropped.
func BoundText(s string) string {
	return textbound.Bound(s)
}
