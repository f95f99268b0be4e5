package main

import (
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const rssHelperEnv = "CATENA_BENCH_RSS_HELPER"

// TestRSSHelperProcess is not a test: it is the traced child of
// TestTraceToExit. It touches 64 MiB, then exits with code 7.
func TestRSSHelperProcess(t *testing.T) {
	if os.Getenv(rssHelperEnv) == "" {
		t.Skip("helper process only")
	}
	buf := make([]byte, 64<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	runtime.KeepAlive(buf)
	os.Exit(7)
}

// TestTraceToExit: the recorder sees the traced process's own peak RSS at
// its exit stop, and returns its exit code.
func TestTraceToExit(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a subprocess")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pid, err := syscall.ForkExec(os.Args[0], []string{os.Args[0], "-test.run=^TestRSSHelperProcess$", "-test.count=1"},
		&syscall.ProcAttr{Env: append(os.Environ(), rssHelperEnv+"=1"), Files: []uintptr{0, 1, 2},
			Sys: &syscall.SysProcAttr{Ptrace: true}})
	require.NoError(t, err)
	require.Greater(t, pid, 1)
	hwm, ru, code, err := traceToExit(pid)
	require.NoError(t, err)
	assert.Equal(t, 7, code)
	assert.GreaterOrEqual(t, hwm, int64(64<<10), "VmHWM in kB covers the 64 MiB touched")
	assert.GreaterOrEqual(t, ru.Maxrss, hwm-1024, "ru_maxrss is at least the process's own peak")
}

func TestReadRSS(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rss.txt")
	require.NoError(t, writeFile(path, []byte("ADD 6100 9900\nDEL 5900 9800\n")))
	got, err := readRSS(path)
	require.NoError(t, err)
	assert.Equal(t, []rssSample{{"ADD", 6100, 9900}, {"DEL", 5900, 9800}}, got)
	hwm, maxrss := peakRSS(got)
	assert.Equal(t, int64(6100), hwm)
	assert.Equal(t, int64(9900), maxrss)

	require.NoError(t, writeFile(path, []byte("ADD lots\n")))
	_, err = readRSS(path)
	assert.ErrorContains(t, err, "rss sample")
}
