package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Runnable runs until ctx is done, then returns nil; or returns an error
// when it cannot go on.
type Runnable interface {
	Run(ctx context.Context) error
}

// RunnableFunc adapts a function to Runnable.
type RunnableFunc func(ctx context.Context) error

// Run calls f.
func (f RunnableFunc) Run(ctx context.Context) error { return f(ctx) }

var _ Runnable = RunnableFunc(nil)

// Named is a Runnable with a name for its errors.
type Named struct {
	Name string
	Runnable
}

// RunAll runs every component until ctx is done or one of them fails; a
// failure stops the others. It returns once all have returned: nil if they
// all returned nil, else the errors, each naming its component.
func RunAll(ctx context.Context, rs ...Named) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for n, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Run(ctx); err != nil {
				errs[n] = fmt.Errorf("%s: %w", r.Name, err)
				cancel()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
