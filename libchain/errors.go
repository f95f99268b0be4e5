package libchain

import (
	"context"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/catena-cni/catena/libchain/invoke"
)

// codeOf returns the CNI error code carried by err, or def.
func codeOf(err error, def uint) uint {
	var te *types.Error
	if errors.As(err, &te) && te.Code != 0 {
		return te.Code
	}
	return def
}

// msgOf renders err for a message: a bare CNI error as its message and
// details (not its JSON), anything else, wrapped or not, as err.Error().
func msgOf(err error) string {
	if xe, ok := err.(*invoke.ExitError); ok { //nolint:errorlint // only a bare one: its status adds nothing to the message
		err = xe.Err
	}
	if te, ok := err.(*types.Error); ok { //nolint:errorlint // a wrapped CNI error is rendered with its wrapping, as err.Error()
		if te.Details != "" {
			return te.Msg + ": " + te.Details
		}
		return te.Msg
	}
	return err.Error()
}

// cniError turns err into the *types.Error Catena prints, keeping the code
// of the underlying CNI error (a delegate's, say) unless there is none.
func cniError(def uint, format string, args ...any) *types.Error {
	err := fmt.Errorf(format, args...)
	return types.NewError(codeOf(err, def), "catena: "+err.Error(), "")
}

// cniErrorCode is cniError with a fixed code, whatever err carries.
func cniErrorCode(code uint, format string, args ...any) *types.Error {
	return types.NewError(code, "catena: "+fmt.Errorf(format, args...).Error(), "")
}

// delegateError says which delegate failed which verb. It wraps the
// delegate's own error, so its CNI code survives.
type delegateError struct {
	Verb     string
	Delegate string // "delegate 1 (portmap)"
	Err      error
}

// Error is bounded (BoundText): whatever the delegate said, this is what
// records, the event journal, logs and Catena's own errors repeat.
func (e *delegateError) Error() string {
	return BoundText(fmt.Sprintf("%s %s failed: %s", e.Delegate, e.Verb, msgOf(e.Err)))
}

func (e *delegateError) Unwrap() error { return e.Err }

// isTimeout reports whether err says the delegate was stopped by a deadline
// or cancellation, so that its outcome is unknown.
func isTimeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}
