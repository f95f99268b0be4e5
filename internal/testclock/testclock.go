// Package testclock is a fake clock for tests, safe for concurrent use: it
// stands still until the test moves it.
//
// Files:
//
//	testclock.go       Clock: Now and Advance
//	testclock_test.go  Now stands still, Advance moves it, from goroutines at once
package testclock

import (
	"sync"
	"time"
)

// Clock is a time that only Advance moves.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New is a Clock at t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
