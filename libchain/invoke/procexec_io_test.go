//go:build linux

package invoke

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain/internal/textbound"
)

// lateEOF is a delegate that succeeds at once, but whose stdout reaches
// EOF only 2s after it exited: a child it left behind (or, just as well, a
// catena starved of CPU on a saturated node, whose reader of that pipe does
// not run for seconds) holds it. Its result was written in full before it
// exited.
const lateEOF = `echo '{"cniVersion":"1.0.0","ips":[{"address":"10.1.2.3/24"}]}'
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
	writeScript(t, dir, "late", lateEOF)

	exec := NewExec(nil)
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
		{name: "a huge CNI error", stdout: `{"code":7,"msg":"` + strings.Repeat("m", 1<<20) + `","details":"` + strings.Repeat("d", 1<<20) + `"}`,
			want: strings.Repeat("m", textbound.Max) + "... [truncated 1044480 bytes]: " + strings.Repeat("d", textbound.Max) + "... [truncated 1044480 bytes]", wantCode: 7},
		{name: "huge stderr only", stderr: strings.Repeat("e", 1<<20), want: `plugin failed: "` + strings.Repeat("e", textbound.Max) + `... [truncated 1044480 bytes]": exec`},
		{name: "huge garbage", stdout: strings.Repeat("{", 1<<20), want: `its error "` + strings.Repeat("{", textbound.Max) + `... [truncated 1044480 bytes]" does not parse`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := pluginErr(cause, []byte(tc.stdout), []byte(tc.stderr))
			var te *types.Error
			require.ErrorAs(t, err, &te)
			assert.True(t, strings.Contains(msgOf(err), tc.want), "%.200s... does not contain %.200s...", msgOf(err), tc.want)
			assert.Equal(t, tc.wantCode, te.Code)
			assert.Less(t, len(te.Msg)+len(te.Details), 3*textbound.Max)
		})
	}
}

// writeScript installs an executable shell script name in dir.
func writeScript(t *testing.T, dir, name, body string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	require.NoError(t, err)
	_, err = f.WriteString("#!/bin/sh\n" + body)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// TestProcExecOutput: what a delegate prints, by outcome. Its stderr
// reaches ProcExec.Stderr whether it succeeds or fails (it was dropped
// when a failing delegate also printed its error on stdout), cut past
// MaxStderr; a stdout past MaxResult is an error, whatever it says.
func TestProcExecOutput(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, script string
		wantErr      string // "" = success
		wantStderr   string
		wantTrunc    int // bytes of stderr said to be dropped
		// wantStatus is the exit status the error carries; nil for none.
		wantStatus *int
	}{
		{"success with stderr", `echo diag >&2; echo '{"cniVersion":"1.0.0"}'`, "", "diag\n", 0, nil},
		{"error on stdout and stderr", `echo diag >&2; echo '{"code":7,"msg":"bad"}'; exit 1`, "bad", "diag\n", 0, ptr(1)},
		{"error with another status", `echo '{"code":11,"msg":"try later"}'; exit 3`, "try later", "", 0, ptr(3)},
		{"killed by a signal", `kill -9 $$`, "plugin failed with no error message: signal: killed", "", 0, ptr(-1)},
		{"stderr past MaxStderr", `head -c 100000 /dev/zero | tr '\0' e >&2; echo '{"cniVersion":"1.0.0"}'`, "", strings.Repeat("e", MaxStderr), 100000 - MaxStderr, nil},
		{"stdout past MaxResult", `head -c 2000000 /dev/zero | tr '\0' ' '; echo '{"cniVersion":"1.0.0"}'`, "printed more than 1048576 bytes on stdout (2000023)", "", 0, nil},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := fmt.Sprintf("d%d", i)
			writeScript(t, dir, name, tt.script)
			var stderr bytes.Buffer
			out, err := (&ProcExec{Stderr: &stderr}).ExecPlugin(context.Background(), filepath.Join(dir, name), nil, nil)
			if tt.wantErr == "" {
				require.NoError(t, err)
				assert.JSONEq(t, `{"cniVersion":"1.0.0"}`, string(out))
			} else {
				require.Error(t, err)
				assert.Contains(t, msgOf(err), tt.wantErr)
			}
			status, ok := ExitStatus(err)
			if assert.Equal(t, tt.wantStatus != nil, ok, "an exit status") && ok {
				assert.Equal(t, *tt.wantStatus, status)
				var te *types.Error
				require.ErrorAs(t, err, &te, "the CNI error within")
				assert.Equal(t, te.Error(), err.Error(), "renders as its CNI error")
			}
			got := stderr.String()
			if tt.wantTrunc > 0 {
				marker := fmt.Sprintf("\n... [truncated %d bytes] of the stderr of %s\n", tt.wantTrunc, filepath.Join(dir, name))
				assert.True(t, got == tt.wantStderr+marker, "stderr: %d bytes, ends %q", len(got), got[max(0, len(got)-100):])
				return
			}
			assert.Equal(t, tt.wantStderr, got)
		})
	}
}

func ptr[T any](v T) *T { return &v }

// msgOf renders err as the engine does in a message: a bare CNI error as
// its message and details, anything else as err.Error().
func msgOf(err error) string {
	var te *types.Error
	if !errors.As(err, &te) {
		return err.Error()
	}
	if te.Details != "" {
		return te.Msg + ": " + te.Details
	}
	return te.Msg
}
