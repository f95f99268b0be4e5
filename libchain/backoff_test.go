package libchain

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRetryBackoff(t *testing.T) {
	tests := []struct {
		failed int
		want   time.Duration
	}{
		{-1, 0}, {0, 0}, {1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second},
		{9, 256 * time.Second}, {10, 5 * time.Minute}, {11, 5 * time.Minute}, {1 << 30, 5 * time.Minute},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, retryBackoff(tc.failed), "after %d failed attempts", tc.failed)
	}
}
