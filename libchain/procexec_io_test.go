//go:build linux

package libchain

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lateEOF is a delegate that succeeds at once, but whose stdout reaches
// EOF only 2s after it exited: a child it left behind (or, just as well, a
// catena starved of CPU on a saturated node, whose reader of that pipe does
// not run for seconds) holds it. Its result was written in full before it
// exited.
const lateEOF = `#!/bin/sh
echo '{"cniVersion":"1.0.0","ips":[{"address":"10.1.2.3/24"}]}'
( sleep 2 ) &
exit 0
`

// TestDelegateOutputCompletingAfterExit: a delegate that exited with
// success and printed a complete result is a success, even when the end of
// its output comes a little after its exit. (With a WaitDelay of 1s this
// failed with "ADD failed: " and code 999: the success result was parsed as
// an error with no message. Seen under load in the isolation test, on bridge
// and tuning.)
func TestDelegateOutputCompletingAfterExit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "late")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	require.NoError(t, err)
	_, err = f.WriteString(lateEOF)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	exec := NewInvokeExecutor()
	res, err := exec.Add(context.Background(), Call{Verb: "ADD", Type: "late",
		Config: []byte(`{"cniVersion":"1.0.0","name":"n","type":"late"}`),
		Args:   RuntimeArgs{ContainerID: "c1", IfName: "eth0", Path: dir}})
	require.NoError(t, err)
	raw, err := json.Marshal(res)
	require.NoError(t, err)
	assert.Contains(t, string(raw), "10.1.2.3/24")
}

// TestPluginErrNeverEmpty: whatever ends a delegate call in error, the
// message says what; a success result on stdout is not an error message.
func TestPluginErrNeverEmpty(t *testing.T) {
	cause := errors.New("exec: WaitDelay expired before I/O complete")
	tests := []struct {
		name           string
		stdout, stderr string
		want           string
		wantCode       uint
	}{
		{name: "a success result on stdout", stdout: `{"cniVersion":"1.0.0"}`,
			want: "plugin failed after printing a success result: exec: WaitDelay expired before I/O complete"},
		{name: "nothing at all", want: "plugin failed with no error message: exec: WaitDelay expired"},
		{name: "stderr only", stderr: "oops", want: `plugin failed: "oops": exec: WaitDelay expired`},
		{name: "a CNI error", stdout: `{"code":7,"msg":"bad config"}`, want: "bad config", wantCode: 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := pluginErr(cause, []byte(tc.stdout), []byte(tc.stderr))
			var te *types.Error
			require.ErrorAs(t, err, &te)
			assert.Contains(t, msgOf(err), tc.want)
			assert.Equal(t, tc.wantCode, te.Code)
		})
	}
}
