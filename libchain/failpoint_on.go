//go:build failpoint

package libchain

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// FailpointEnv names the crash point of a binary built with
// `-tags failpoint`: "<point>:<n>" kills the process with SIGKILL at the
// n-th time (1-based) it passes <point>, so that no deferred cleanup runs.
// The points:
//
//	before-write, after-write     around every durable record write
//	before-remove, after-remove   around the removal of a record
//	add-running                   a delegate's ADD has started and is running
//	del-running                   a delegate's DEL has started and is running
//	teardown-step                 before each DEL of a rollback, DEL or retry
const FailpointEnv = "CATENA_FAILPOINT"

var failpoints = struct {
	once  sync.Once
	name  string
	n     int
	mu    sync.Mutex
	count int
}{}

func hit(point string) {
	fp := &failpoints
	fp.once.Do(func() {
		name, n, ok := strings.Cut(os.Getenv(FailpointEnv), ":")
		if !ok {
			return
		}
		if v, err := strconv.Atoi(n); err == nil && v > 0 {
			fp.name, fp.n = name, v
		}
	})
	if fp.name != point {
		return
	}
	fp.mu.Lock()
	fp.count++
	die := fp.count == fp.n
	fp.mu.Unlock()
	if die {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL is not deliverable late; never go on
	}
}
