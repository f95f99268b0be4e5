package invoke

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestProcExecGatesStdin runs /bin/cat as a "delegate": it starts at once,
// but reads its request only when the gate returns, and nothing at all when
// the gate returned an error (the caller's record write failed).
func TestProcExecGatesStdin(t *testing.T) {
	tests := []struct {
		name     string
		writeErr error
		want     string
	}{
		{name: "write succeeded: the request is delivered", want: `{"cniVersion":"1.1.0"}`},
		{name: "write failed: the delegate reads EOF", writeErr: errors.New("disk full"), want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			wrote := make(chan time.Time, 1)
			gate := func() error {
				<-release
				wrote <- time.Now()
				return tc.writeErr
			}
			type outcome struct {
				out []byte
				at  time.Time
			}
			done := make(chan outcome, 1)
			go func() {
				out, _ := (&ProcExec{}).ExecPlugin(WithStdinGate(context.Background(), gate), "/bin/cat", []byte(`{"cniVersion":"1.1.0"}`), nil)
				done <- outcome{out, time.Now()}
			}()
			select {
			case <-done:
				t.Fatal("the delegate finished before the record was written")
			case <-time.After(50 * time.Millisecond):
			}
			close(release)
			got := <-done
			assert.Equal(t, tc.want, string(got.out))
			assert.False(t, got.at.Before(<-wrote), "nothing is delivered before the write returns")
			assert.Empty(t, wrote, "the gate ran once")
		})
	}
}
