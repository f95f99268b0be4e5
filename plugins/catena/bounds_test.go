package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/internal/retriertest"
)

// boundsWorld is a catena binary and a CNI_PATH holding failer.
type boundsWorld struct {
	bin, cniPath string
}

func newBoundsWorld(t *testing.T) boundsWorld {
	t.Helper()
	w := boundsWorld{bin: buildCatena(t), cniPath: t.TempDir()}
	buildPlugin(t, w.cniPath, "failer")
	return w
}

// newCacheDir is a cache dir in a temp dir of t's whose retrier lock t
// holds (retriertest.Hold): the catena calls of these tests never start a
// retrier, which would outlive the test and write to the cache dir while
// the temp dir is removed.
func newCacheDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cache")
	retriertest.Hold(t, dir)
	return dir
}

// run calls catena with verb on a chain of delegates (a JSON list) whose
// records live in cacheDir. CNI_NETNS_OVERRIDE lets catena and failer run
// in the test's own netns: nothing here touches a network.
func (w boundsWorld) run(t *testing.T, verb, cacheDir, delegates string) invocation {
	t.Helper()
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"podnet","type":"catena","cacheDir":%q,"delegates":%s}`, cacheDir, delegates)
	return runCatena(t, w.bin, map[string]string{
		"CNI_COMMAND": verb, "CNI_CONTAINERID": "c1", "CNI_NETNS": "/proc/self/ns/net", "CNI_NETNS_OVERRIDE": "1",
		"CNI_IFNAME": "eth0", "CNI_PATH": w.cniPath,
	}, conf)
}

// largestFile is the size and path of the largest regular file under dir.
func largestFile(t *testing.T, dir string) (int64, string) {
	t.Helper()
	var size int64
	var name string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err == nil && fi.Size() > size {
			size, name = fi.Size(), p
		}
		return err
	}))
	return size, name
}

// cniErr decodes the CNI error catena printed; it fails the test if stdout
// is anything else.
func cniErr(t *testing.T, inv invocation) types.Error {
	t.Helper()
	var exitErr *exec.ExitError
	require.ErrorAs(t, inv.err, &exitErr, "catena failed")
	var e types.Error
	require.NoError(t, json.Unmarshal(inv.stdout, &e), "stdout is a CNI error (%d bytes)", len(inv.stdout))
	return e
}

// TestHugeDelegateErrorStaysBounded: A delegate
// fails ADD with a 20 MiB message while the rollback DEL of an earlier one
// fails. Before: 21 MB of error on stdout, 42 MB on stderr, and a 41.9 MB
// record that Load then refused, so the next DEL quarantined it and
// reported success while the required DEL still failed (a silent leak).
// Now every piece is a few KiB, and the next DEL still fails, as it must.
// A message under invoke.MaxResult is parsed and cut; a larger stdout is
// refused whole.
func TestHugeDelegateErrorStaysBounded(t *testing.T) {
	w := newBoundsWorld(t)
	tests := []struct {
		name    string
		pad     int
		wantMsg string
	}{
		{"20 MiB message", 20 << 20, "delegate 1 (failer) ADD failed: catena: the delegate printed more than 1048576 bytes on stdout"},
		{"512 KiB message", 512 << 10, "delegate 1 (failer) ADD failed: failer: injected ADD failurexxx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cacheDir := newCacheDir(t)
			chain := fmt.Sprintf(`[{"type":"failer","failDel":true},{"type":"failer","failAdd":true,"padError":%d}]`, tt.pad)

			add := w.run(t, "ADD", cacheDir, chain)
			biggest, where := largestFile(t, cacheDir)
			t.Logf("ADD: stdout %d bytes, stderr %d bytes, largest file under cacheDir %d bytes (%s)",
				len(add.stdout), len(add.stderr), biggest, where)
			e := cniErr(t, add)
			assert.Less(t, len(add.stdout), 16<<10, "stdout")
			assert.Less(t, len(add.stderr), 64<<10, "stderr")
			assert.Less(t, biggest, int64(64<<10), "largest file under the cacheDir: %s", where)
			assert.Contains(t, e.Msg, tt.wantMsg)
			if tt.pad < 1<<20 {
				assert.Contains(t, e.Msg, "... [truncated ")
			}
			assert.Contains(t, e.Msg, "rollback incomplete, still held and recorded for the next DEL: delegate 0 (failer) DEL failed")

			del := w.run(t, "DEL", cacheDir, chain)
			t.Logf("DEL: stdout %d bytes, stderr %d bytes", len(del.stdout), len(del.stderr))
			e = cniErr(t, del)
			assert.Equal(t, uint(types.ErrTryAgainLater), e.Code, e.Msg)
			assert.Contains(t, e.Msg, "delegate 0 (failer) DEL failed: failer: injected DEL failure")
			assert.Less(t, len(del.stdout), 16<<10, "stdout")
		})
	}
}

// TestDelegateFloodKeepsCatenaSmall: a delegate that prints 300 MB on
// stdout or stderr does not take catena past a few tens of MiB: catena
// keeps the first MiB of stdout (a larger result is an error naming the
// delegate) and the first 64 KiB of stderr, and drains the rest.
func TestDelegateFloodKeepsCatenaSmall(t *testing.T) {
	w := newBoundsWorld(t)
	const flood = 300 << 20
	const maxRSS = 48 << 20
	tests := []struct {
		name     string
		delegate string
		wantErr  string // "" = ADD succeeds
	}{
		{"stdout, then a result", fmt.Sprintf(`{"type":"failer","floodStdout":%d}`, flood),
			"delegate 0 (failer) ADD failed: catena: the delegate printed more than 1048576 bytes on stdout"},
		{"stdout, then an error", fmt.Sprintf(`{"type":"failer","failAdd":true,"floodStdout":%d}`, flood),
			"delegate 0 (failer) ADD failed: catena: the delegate printed more than 1048576 bytes on stdout"},
		{"stderr, then a result", fmt.Sprintf(`{"type":"failer","floodStderr":%d}`, flood), ""},
		{"stderr, then an error", fmt.Sprintf(`{"type":"failer","failAdd":true,"floodStderr":%d}`, flood),
			"delegate 0 (failer) ADD failed: failer: injected ADD failure"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cacheDir := newCacheDir(t)
			inv := w.run(t, "ADD", cacheDir, "["+tt.delegate+"]")
			biggest, where := largestFile(t, cacheDir)
			t.Logf("ADD: stdout %d bytes, stderr %d bytes, largest file %d bytes (%s), peak RSS %d KiB, %s",
				len(inv.stdout), len(inv.stderr), biggest, where, inv.maxRSS>>10, inv.took)
			assert.Less(t, inv.maxRSS, int64(maxRSS), "peak RSS")
			assert.Less(t, len(inv.stderr), 2*(64<<10)+(16<<10), "stderr: the ADD's 64 KiB, the rollback DEL's, the log")
			assert.Less(t, biggest, int64(64<<10), "largest file under the cacheDir: %s", where)
			if tt.wantErr == "" {
				require.NoError(t, inv.err, "stdout %.4096s", inv.stdout)
				return
			}
			e := cniErr(t, inv)
			assert.Contains(t, e.Msg, tt.wantErr)
			assert.Less(t, len(inv.stdout), 16<<10, "stdout")
		})
	}
}

// TestDelegateStderrReachesCaller: a delegate's stderr reaches catena's
// stderr whether the delegate succeeds or fails, also when it prints its
// error on stdout (it used to be dropped then). Past 64 KiB it is cut, and
// stderr says how much was dropped.
func TestDelegateStderrReachesCaller(t *testing.T) {
	w := newBoundsWorld(t)
	tests := []struct {
		name, delegate string
		wantTruncated  bool
	}{
		{"success", `{"type":"failer","floodStderr":48}`, false},
		{"error on stdout", `{"type":"failer","failAdd":true,"floodStderr":48}`, false},
		{"over 64 KiB", `{"type":"failer","failAdd":true,"floodStderr":100000}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := w.run(t, "ADD", newCacheDir(t), "["+tt.delegate+"]")
			stderr := string(inv.stderr)
			assert.Contains(t, stderr, "failer ADD stderr noise\nfailer ADD stderr noise\n")
			if tt.wantTruncated {
				assert.Contains(t, stderr, fmt.Sprintf("[truncated %d bytes]", 100000-64<<10))
				// The ADD's 64 KiB, the rollback DEL's, the log.
				assert.Less(t, len(stderr), 2*(64<<10)+(16<<10))
			} else {
				assert.NotContains(t, stderr, "truncated")
			}
		})
	}
}
