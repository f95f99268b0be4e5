package clitest

import (
	"bytes"
	"io"
	"sync"
)

// SyncBuffer is a log or output sink safe for a command's goroutines and
// the test reading it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

var _ io.Writer = (*SyncBuffer)(nil)

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
