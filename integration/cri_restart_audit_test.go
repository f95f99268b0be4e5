package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// restartPoll is what polling ListPodSandbox from the moment a restarted
// containerd's process starts saw.
type restartPoll struct {
	polls, failed int
	errs          map[string]int
	// first is the first successful answer: its number of sandboxes and
	// when it came (since the process started); short counts the answers
	// that listed fewer sandboxes than were running.
	first      int
	firstAfter time.Duration
	answers    int
	short      int
	minCount   int
}

// pollListPodSandbox calls ListPodSandbox as fast as it can, each time over
// a new connection (a reused one would wait out gRPC's reconnect backoff
// and miss the first moments), until 2 s after the first answer or 60 s.
func pollListPodSandbox(sock string, running int) restartPoll {
	r := restartPoll{errs: map[string]int{}, minCount: -1}
	start := time.Now()
	var firstAt time.Time
	for time.Since(start) < time.Minute && (firstAt.IsZero() || time.Since(firstAt) < 2*time.Second) {
		r.polls++
		conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			r.failed++
			r.errs["dial: "+err.Error()]++
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := cri.NewRuntimeServiceClient(conn).ListPodSandbox(ctx, &cri.ListPodSandboxRequest{})
		cancel()
		_ = conn.Close()
		if err != nil {
			r.failed++
			msg := err.Error()
			if i := strings.Index(msg, "dial unix"); i >= 0 {
				msg = msg[:i] + "dial unix ...: " + msg[strings.LastIndex(msg, ":")+2:]
			}
			r.errs[msg]++
			continue
		}
		n := len(resp.GetItems())
		r.answers++
		if firstAt.IsZero() {
			firstAt, r.first, r.firstAfter = time.Now(), n, time.Since(start)
		}
		if n < running {
			r.short++
		}
		if r.minCount < 0 || n < r.minCount {
			r.minCount = n
		}
	}
	return r
}

// TestContainerdRestartListsOnlyWhenRestored is the audit question of issue
// 24: can a real containerd restart answer ListPodSandbox before it has
// restored its sandboxes (an empty or partial list, which the reconciler
// would take for forgotten sandboxes)? Sandboxes run; containerd is
// restarted, by SIGTERM and by SIGKILL (its shims and sandboxes live on),
// and ListPodSandbox is polled as fast as possible from the moment the new
// process starts. Every answer must list every running sandbox.
func TestContainerdRestartListsOnlyWhenRestored(t *testing.T) {
	const sandboxes, restarts = 8, 4
	for _, v := range []containerdVersion{containerd24(), containerd16()} {
		t.Run("containerd "+v.name, func(t *testing.T) {
			w := newWorld(t)
			net := "restart-" + w.id
			d := startContainerd(t, v, string(w.catenaList(net, v.cniVersion(), w.bridgeDelegate()).Bytes))
			for range sandboxes {
				id, err := d.runPod(d.podConfig("restart", 0))
				require.NoError(t, err, d.logTail())
				pid := d.sandboxPID(id)
				t.Cleanup(func() { killPause(pid) })
			}
			require.Len(t, d.pods(), sandboxes)
			for i := range restarts {
				how := "SIGTERM"
				if i%2 == 1 {
					how = "SIGKILL"
				}
				if how == "SIGKILL" {
					d.crash()
				} else {
					require.NoError(t, d.cmd.Process.Signal(syscall.SIGTERM))
					select {
					case <-d.exited:
					case <-time.After(20 * time.Second):
						d.crash()
					}
				}
				d.startAgain()
				r := pollListPodSandbox(d.sock, sandboxes)
				d.waitReady()
				var errs []string
				for msg, n := range r.errs {
					errs = append(errs, fmt.Sprintf("%d x %q", n, msg))
				}
				sort.Strings(errs)
				fmt.Printf("containerd %s restart %d (%s), %d sandboxes running: %d polls, %d failed (%s); first answer after %s listed %d; %d answers, %d of them short, fewest listed %d\n",
					v.name, i+1, how, sandboxes, r.polls, r.failed, strings.Join(errs, ", "), r.firstAfter.Round(time.Millisecond), r.first, r.answers, r.short, r.minCount)
				assert.Positive(t, r.answers, "containerd answered")
				assert.Zero(t, r.short, "no answer listed fewer sandboxes than run")
				assert.Equal(t, sandboxes, r.first, "the first answer lists every sandbox")
			}
			require.Len(t, d.pods(), sandboxes)
		})
	}
}
