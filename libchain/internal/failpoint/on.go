//go:build failpoint

package failpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Env names the crash point of a binary built with `-tags failpoint`:
// "<point>:<n>" kills the process with SIGKILL at the n-th time (1-based)
// it passes <point>, so that no deferred cleanup runs.
// The points:
//
//	before-write, after-write     around every durable record write
//	before-remove, after-remove   around the removal of a record
//	add-running                   a delegate's ADD has started and is running
//	del-running                   a delegate's DEL has started and is running
//	teardown-step                 before each DEL of a rollback, DEL or retry
//	before-quarantine,            around the move of a corrupt record to
//	after-quarantine              quarantine/, after its best-effort DELs
const Env = "CATENA_FAILPOINT"

// TraceEnv names a file to which every point passed is appended, one name
// per line, so that a test learns how many times an undisturbed run passes
// each point, i.e. which crashes it can ask for.
const TraceEnv = "CATENA_FAILPOINT_TRACE"

var failpoints = struct {
	once  sync.Once
	name  string
	n     int
	trace string
	mu    sync.Mutex
	count int
}{}

// Hit marks a crash point: it appends point to the trace file, if any, and
// kills the process if this is the pass Env asks for.
func Hit(point string) {
	if point == "" {
		return
	}
	fp := &failpoints
	fp.once.Do(func() {
		fp.trace = os.Getenv(TraceEnv)
		name, n, ok := strings.Cut(os.Getenv(Env), ":")
		if !ok {
			return
		}
		if v, err := strconv.Atoi(n); err == nil && v > 0 {
			fp.name, fp.n = name, v
		}
	})
	fp.mu.Lock()
	if fp.trace != "" {
		traceHit(fp.trace, point)
	}
	die := false
	if fp.name == point {
		fp.count++
		die = fp.count == fp.n
	}
	fp.mu.Unlock()
	if die {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL is not deliverable late; never go on
	}
}

// traceHit appends point to the trace file with one write. A failure is
// reported on stderr (never stdout: it carries the CNI result).
func traceHit(path, point string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err == nil {
		_, err = f.WriteString(point + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "catena: failpoint trace %s: %v\n", path, err)
	}
}
