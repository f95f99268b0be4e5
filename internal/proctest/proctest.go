// Package proctest tells tests whether a process has exited, and who its
// parent is, from /proc.
//
// Files:
//
//	proctest.go       Stat: a process's state and parent; Gone: no such process, or a zombie waiting to be reaped
//	proctest_test.go  Stat and Gone on a child, running, a zombie, and reaped
package proctest

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// Stat returns pid's state (R, S, Z, ...) and its parent's pid, from
// /proc/PID/stat. Its error is os.ReadFile's (fs.ErrNotExist or ESRCH for
// a process that is gone), or says the file is not in stat's format.
func Stat(pid int) (state string, ppid int, err error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, err
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 2 {
		return "", 0, fmt.Errorf("/proc/%d/stat: %q: no state and parent", pid, s)
	}
	ppid, err = strconv.Atoi(fields[1])
	if err != nil {
		return "", 0, fmt.Errorf("/proc/%d/stat: parent: %w", pid, err)
	}
	return fields[0], ppid, nil
}

// Gone reports whether pid has exited: no such process, or a zombie (dead,
// waiting for its parent to reap it). Any other error reading its stat
// fails the test.
func Gone(t testing.TB, pid int) bool {
	t.Helper()
	state, _, err := Stat(pid)
	if os.IsNotExist(err) || errors.Is(err, syscall.ESRCH) {
		return true
	}
	require.NoError(t, err)
	return Dead(state)
}

// Dead reports whether a Stat state is a process that has exited: a
// zombie, or dead.
func Dead(state string) bool {
	return state == "Z" || state == "X"
}
