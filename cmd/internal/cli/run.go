package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// UsageError is a command line mistake: exit code 2, with a pointer to
// --help.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError.
func Usagef(format string, args ...any) error {
	return &UsageError{fmt.Errorf(format, args...)}
}

// Execute runs root with args and returns the exit code: 0 on success, 1
// on failure, 2 on a usage error (an unknown command, which cobra does not
// type, included). The error goes to stderr as "<name>: <error>", escaped
// with PrintableLines: it may carry a delegate's or a record's text, to be
// shown, never obeyed.
func Execute(ctx context.Context, root *cobra.Command, args []string, stderr io.Writer) int {
	root.SetArgs(args)
	_, _, err := root.Find(args)
	if err != nil {
		err = &UsageError{err}
	} else {
		err = root.ExecuteContext(ctx)
	}
	if err == nil {
		return 0
	}
	name := root.Name()
	// The exit code says it failed even when stderr cannot.
	_, _ = fmt.Fprintf(stderr, "%s: %s\n", name, PrintableLines(err.Error()))
	var ue *UsageError
	if errors.As(err, &ue) {
		_, _ = fmt.Fprintf(stderr, "run '%s --help' for usage\n", name)
		return 2
	}
	return 1
}
