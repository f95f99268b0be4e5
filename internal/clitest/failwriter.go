package clitest

import (
	"errors"
	"io"
	"strings"
)

// ErrWrite is what a FailWriter's failed writes return.
var ErrWrite = errors.New("write failed (test)")

// FailWriter is a command's stdout that fails, as a full disk or a closed
// pipe would: from the first write holding On, every write fails with
// ErrWrite. What it took before is in Written.
type FailWriter struct {
	On      string
	Written strings.Builder
	failed  bool
}

var _ io.Writer = (*FailWriter)(nil)

func (w *FailWriter) Write(p []byte) (int, error) {
	if w.failed || strings.Contains(string(p), w.On) {
		w.failed = true
		return 0, ErrWrite
	}
	return w.Written.Write(p)
}
