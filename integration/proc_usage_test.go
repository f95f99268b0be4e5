package integration

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/node/reconcile/fakecri"
)

// procStatusKB is a field of /proc/<pid>/status in kB ("VmRSS:",
// "VmHWM:", "RssAnon:"); false when the process or the field is gone.
func procStatusKB(pid int, key string) (int64, bool) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// procCPU is a process's CPU time so far: utime+stime of /proc/<pid>/stat.
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	// the fields after the command, which is in parentheses: state is
	// field 3, utime 14, stime 15
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	utime, err := strconv.ParseInt(f[11], 10, 64)
	require.NoError(t, err)
	stime, err := strconv.ParseInt(f[12], 10, 64)
	require.NoError(t, err)
	return time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ 100
}

// fakeCRIServer is a fake CRI on a socket of the test's.
type fakeCRIServer struct {
	*fakecri.Server
	sock string
}

// startFakeCRI serves a fake CRI until the test ends.
func startFakeCRI(t *testing.T) fakeCRIServer {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "cri.sock")
	s, err := fakecri.Start(sock)
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	return fakeCRIServer{s, sock}
}
