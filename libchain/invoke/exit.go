package invoke

import (
	"errors"

	"github.com/containernetworking/cni/pkg/types"
)

// ExitError is a delegate that ran and failed: the CNI error it printed
// (or the one ProcExec made of its stderr when it printed none), and its
// exit status. It unwraps to the CNI error, so its code survives every
// errors.As, and renders as that error does.
type ExitError struct {
	Err *types.Error
	// Status is the delegate's exit status; -1 when a signal ended it.
	Status int
}

var _ interface{ Unwrap() error } = (*ExitError)(nil)

func (e *ExitError) Error() string { return e.Err.Error() }

// Unwrap returns the CNI error.
func (e *ExitError) Unwrap() error { return e.Err }

// ExitStatus is the exit status of the delegate whose failed call err
// describes, and whether err holds one: it does when the delegate ran and
// exited non-zero, or a signal ended it (-1); not when it could not be
// started, was killed at its deadline, or printed too much.
func ExitStatus(err error) (int, bool) {
	var xe *ExitError
	if errors.As(err, &xe) {
		return xe.Status, true
	}
	return 0, false
}

// withStatus is te with the exit status that cause (from the spawned
// child's wait) carries; te alone when cause carries none.
func withStatus(cause error, te *types.Error) error {
	var xe *exitError
	if !errors.As(cause, &xe) {
		return te
	}
	return &ExitError{Err: te, Status: xe.ExitCode()}
}
