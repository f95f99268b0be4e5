//go:build linux

package libchain

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/internal/proctest"
	"github.com/catena-cni/catena/libchain/invoke"
)

// keeperPlugin is a 1.1.0 delegate whose GC leaves a child that escaped
// its process group (setsid) holding its stdout open, and writes that
// child's pid to keeper.pid beside itself. As "keeper" it then exits at
// once; as "keeper-hang" it hangs until it is killed.
const keeperPlugin = `#!/bin/sh
d=$(dirname "$0"); me=$(basename "$0")
case "$CNI_COMMAND" in
VERSION) echo '{"cniVersion":"1.1.0","supportedVersions":["1.0.0","1.1.0"]}'; exit 0 ;;
GC)
	cat >/dev/null
	setsid sleep 60 &
	echo $! >"$d/keeper.tmp" && mv "$d/keeper.tmp" "$d/keeper.pid"
	[ "$me" = keeper-hang ] && exec sleep 60
	exit 0 ;;
esac
exit 0
`

// heldBarrier is a DiskStore that notes how long each exclusive hold of
// the network barrier (a GC's forward) lasted.
type heldBarrier struct {
	*cache.DiskStore
	mu    sync.Mutex
	holds []time.Duration
}

var _ cache.Barrier = (*heldBarrier)(nil)

func (b *heldBarrier) Barrier(ctx context.Context, network string, exclusive bool) (cache.Unlocker, error) {
	u, err := b.DiskStore.Barrier(ctx, network, exclusive)
	if err != nil || !exclusive {
		return u, err
	}
	return &timedUnlock{Unlocker: u, b: b, at: time.Now()}, nil
}

type timedUnlock struct {
	cache.Unlocker
	b  *heldBarrier
	at time.Time
}

func (u *timedUnlock) Unlock() error {
	u.b.mu.Lock()
	u.b.holds = append(u.b.holds, time.Since(u.at))
	u.b.mu.Unlock()
	return u.Unlocker.Unlock()
}

// TestGCForwardHoldsTheBarrierWithinItsBound: a delegate's GC under the
// network barrier leaves a descendant that escaped its process group
// holding its stdout open; the delegate exits at once, or hangs until it
// is killed at its bound. Either way the barrier is released within the
// bound (a third of lockTimeout), the output's grace included, not the
// 10 s output grace past it; the cut GC is reported, naming the delegate.
func TestGCForwardHoldsTheBarrierWithinItsBound(t *testing.T) {
	const lockTimeout = 3 * time.Second
	bound := lockTimeout / 3
	// margin: the barrier's own flock, the listing, the spawn of a shell
	// on a loaded machine; the grace past the bound was 10 s
	const margin = 700 * time.Millisecond
	for _, typ := range []string{"keeper", "keeper-hang"} {
		t.Run(typ, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, "bin")
			require.NoError(t, os.Mkdir(bin, 0o755))
			f, err := os.OpenFile(filepath.Join(bin, typ), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
			require.NoError(t, err)
			_, err = f.WriteString(keeperPlugin)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			t.Cleanup(func() { killKeeper(t, bin) })

			cacheDir := filepath.Join(dir, "cache")
			store := &heldBarrier{DiskStore: cache.NewDiskStore(afero.NewOsFs(), cacheDir,
				cache.NewFlockLocker(filepath.Join(cacheDir, cache.LocksDir)))}
			eng := &Engine{Store: store, Exec: invoke.NewExec(nil)}
			conf, err := ParseConfig([]byte(`{"cniVersion":"1.1.0","name":"podnet","cacheDir":"` + cacheDir +
				`","delegateTimeout":"10s","lockTimeout":"` + lockTimeout.String() +
				`","delegates":[{"type":"` + typ + `","cniVersion":"1.1.0"}]}`))
			require.NoError(t, err)
			require.Equal(t, bound, gcForwardBound(conf, 1))

			start := time.Now()
			_, gcErr := eng.CollectGarbage(context.Background(), Request{Conf: conf, Args: RuntimeArgs{Path: bin}}, GCOptions{Valid: []Attachment{}})
			took := time.Since(start)
			store.mu.Lock()
			holds := append([]time.Duration(nil), store.holds...)
			store.mu.Unlock()
			require.Len(t, holds, 1, "one forward, one exclusive hold")
			t.Logf("%s: the barrier held %s (bound %s); GC took %s: %v", typ, holds[0].Round(time.Millisecond), bound,
				took.Round(time.Millisecond), gcErr)
			assert.Less(t, holds[0], bound+margin, "the barrier is released within the bound, output grace included")
			require.Error(t, gcErr, "a cut GC is reported")
			assert.Contains(t, gcErr.Error(), "("+typ+") GC failed")
			_, err = os.Stat(filepath.Join(bin, "keeper.pid"))
			require.NoError(t, err, "the delegate's GC ran and left its child")
		})
	}
}

// killKeeper kills the child the keeper left, if it wrote its pid, and
// waits until it is gone.
func killKeeper(t *testing.T, bin string) {
	raw, err := os.ReadFile(filepath.Join(bin, "keeper.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 1 {
		t.Errorf("keeper.pid: %q", raw)
		return
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	assert.Eventually(t, func() bool { return proctest.Gone(t, pid) }, 5*time.Second, 10*time.Millisecond, "the keeper's child %d exits", pid)
}
