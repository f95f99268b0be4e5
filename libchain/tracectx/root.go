package tracectx

import (
	"crypto/sha256"
	"encoding/hex"
)

// RootTraceID is the trace-id of the root trace started for an operation
// that continues none, from its span ID (16 hex digits, as the journal
// holds it): the first 16 bytes of SHA-256("catena trace " + spanID), in
// lowercase hex. The agent exports such an operation, when its sampler
// asks for it, under this trace, and catenactl shows the same ID, so an
// operator can look a root trace up from the node with only the journal.
// The span ID came from crypto/rand, so no two operations share a root
// trace, and an export repeated after a restart names the same trace.
// "" when spanID is not 16 lowercase hex digits of a valid span.
func RootTraceID(spanID string) string {
	var id SpanID
	if len(spanID) != 2*len(id) || !decodeLowerHex(id[:], spanID) || id.IsZero() {
		return ""
	}
	sum := sha256.Sum256([]byte("catena trace " + spanID))
	return hex.EncodeToString(sum[:16])
}
