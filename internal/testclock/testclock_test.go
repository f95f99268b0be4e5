package testclock

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestClock: the time stands still until Advance, and the advances of
// goroutines at once all count.
func TestClock(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	c := New(start)
	assert.Equal(t, start, c.Now())
	assert.Equal(t, start, c.Now(), "stands still")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { c.Advance(time.Second) })
	}
	wg.Wait()
	assert.Equal(t, start.Add(8*time.Second), c.Now())
}
