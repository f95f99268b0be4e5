// Package proctest tells tests whether a process has exited, from /proc.
//
// Files:
//
//	proctest.go  Gone: no such process, or a zombie waiting to be reaped
package proctest

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// Gone reports whether pid has exited: no such process, or a zombie (dead,
// waiting for its parent to reap it). Any other error reading its stat
// fails the test.
func Gone(t testing.TB, pid int) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if os.IsNotExist(err) || errors.Is(err, syscall.ESRCH) {
		return true
	}
	require.NoError(t, err)
	// pid (comm) state ...: comm may hold spaces and parentheses.
	s := string(data)
	state := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0]
	return state == "Z" || state == "X"
}
