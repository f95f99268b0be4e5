package tracectx

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRootTraceID(t *testing.T) {
	sum := sha256.Sum256([]byte("catena trace 00f067aa0ba902b7"))
	tests := []struct {
		name, span, want string
	}{
		{"a span", "00f067aa0ba902b7", hex.EncodeToString(sum[:16])},
		{"empty", "", ""},
		{"zero span", "0000000000000000", ""},
		{"upper case", "00F067AA0BA902B7", ""},
		{"short", "00f067aa0ba902b", ""},
		{"long", "00f067aa0ba902b70", ""},
		{"not hex", "00f067aa0ba902bz", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RootTraceID(tt.span)
			assert.Equal(t, tt.want, got)
			if got != "" {
				_, err := ParseTraceparent("00-" + got + "-" + tt.span + "-01")
				assert.NoError(t, err, "a valid trace-id")
			}
		})
	}
	assert.NotEqual(t, RootTraceID("00f067aa0ba902b7"), RootTraceID("00f067aa0ba902b8"), "each span its own trace")
}
