//go:build linux

package libchain

import (
	"github.com/catena-cni/catena/internal/proctest"

	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain/invoke"
)

// scriptPlugin is a real CNI "delegate" run as its own process. As "noop"
// it answers ADD with an empty result; as "hanger" it starts a child (a
// sleep) in its process group, writes "<its pid> <child pid>" to
// pids.<containerID> beside itself and waits for the child. Both append
// "<VERB> <name>" to log.
const scriptPlugin = `#!/bin/sh
d=$(dirname "$0"); me=$(basename "$0")
case "$CNI_COMMAND" in
VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0","1.1.0"]}'; exit 0 ;;
esac
echo "$CNI_COMMAND $me" >>"$d/log"
case "$CNI_COMMAND/$me" in
ADD/noop) echo '{"cniVersion":"1.0.0"}' ;;
ADD/hanger)
	sleep 60 &
	echo "$$ $!" >"$d/pids.tmp" && mv "$d/pids.tmp" "$d/pids.$CNI_CONTAINERID"
	wait ;;
esac
exit 0
`

// procEnv is a real engine: an on-disk store with flock locks and the real
// process executor, over a CNI_PATH holding the script plugins.
type procEnv struct {
	dir, cniPath string
	store        *cache.DiskStore
	eng          *Engine
}

func newProcEnv(t *testing.T) *procEnv {
	t.Helper()
	dir := t.TempDir()
	p := &procEnv{dir: dir, cniPath: filepath.Join(dir, "bin")}
	require.NoError(t, os.Mkdir(p.cniPath, 0o755))
	for _, name := range []string{"noop", "hanger"} {
		f, err := os.OpenFile(filepath.Join(p.cniPath, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
		require.NoError(t, err)
		_, err = f.WriteString(scriptPlugin)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	cacheDir := filepath.Join(dir, "cache")
	p.store = cache.NewDiskStore(afero.NewOsFs(), cacheDir, cache.NewFlockLocker(filepath.Join(cacheDir, "locks")))
	p.eng = &Engine{Store: p.store, Exec: invoke.NewExec(nil)}
	return p
}

func (p *procEnv) request(t *testing.T, cid, delegateTimeout, lockTimeout string) Request {
	t.Helper()
	conf, err := ParseConfig([]byte(`{"cniVersion":"1.0.0","name":"podnet","cacheDir":"` + filepath.Join(p.dir, "cache") +
		`","delegateTimeout":"` + delegateTimeout + `","lockTimeout":"` + lockTimeout +
		`","delegates":[{"type":"noop"},{"type":"hanger"}]}`))
	require.NoError(t, err)
	return Request{Conf: conf, Args: RuntimeArgs{ContainerID: cid, IfName: "eth0", Path: p.cniPath}}
}

// hangerPIDs returns the PIDs the hanger wrote: its own and its child's.
func (p *procEnv) hangerPIDs(t *testing.T, cid string) (int, int) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(p.cniPath, "pids."+cid))
	require.NoError(t, err, "the hanger never started")
	f := strings.Fields(string(data))
	require.Len(t, f, 2)
	pids := make([]int, 2)
	for i := range f {
		pids[i], err = strconv.Atoi(f[i])
		require.NoError(t, err)
		require.Greater(t, pids[i], 1, "a real PID")
	}
	return pids[0], pids[1]
}

func (p *procEnv) log(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(p.cniPath, "log"))
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

// lockFiles lists the lock files left under the cache dir.
func (p *procEnv) lockFiles(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(p.dir, "cache", "locks", "*", "*.lock"))
	require.NoError(t, err)
	return m
}

// TestDelegateTimeoutKillsWholeGroup: a delegate that hangs, having started
// a child, is killed at delegateTimeout together with the child. The ADD
// fails (code 11) naming the delegate and the timeout, the hung step gets a
// best-effort DEL and the earlier one its DEL, in reverse, and nothing is
// left: no record, no lock file, no process.
func TestDelegateTimeoutKillsWholeGroup(t *testing.T) {
	p := newProcEnv(t)
	r := p.request(t, "c1", "1s", "5s")

	_, err := p.eng.Add(context.Background(), r)
	require.Error(t, err)
	assert.Equal(t, types.ErrTryAgainLater, cniCode(t, err))
	assert.Contains(t, err.Error(), "delegate 1 (hanger) ADD failed")
	assert.Contains(t, err.Error(), "timed out after 1s (delegateTimeout)")
	assert.Contains(t, err.Error(), "rolled back")

	hanger, child := p.hangerPIDs(t, "c1")
	assert.True(t, proctest.Gone(t, hanger), "the delegate is killed")
	assert.True(t, proctest.Gone(t, child), "the delegate's child is killed with its group")
	assert.Equal(t, []string{"ADD noop", "ADD hanger", "DEL hanger", "DEL noop"}, p.log(t),
		"the unknown step gets a best-effort DEL, then the added one its DEL")
	_, err = p.store.Load(r.Key())
	require.ErrorIs(t, err, cache.ErrNotFound)
	assert.Empty(t, p.lockFiles(t))
}

// TestOverallDeadlineHonoured: a caller's deadline shorter than
// delegateTimeout (and than lockTimeout) bounds the operation: the hung
// delegate's group is killed at the deadline, and the rollback still runs
// to completion past it.
func TestOverallDeadlineHonoured(t *testing.T) {
	p := newProcEnv(t)
	r := p.request(t, "c1", "60s", "60s")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()

	start := time.Now()
	_, err := p.eng.Add(ctx, r)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 30*time.Second, "bounded by the caller's deadline, not delegateTimeout")
	assert.Contains(t, err.Error(), "delegate 1 (hanger) ADD failed")
	assert.Contains(t, err.Error(), "context deadline exceeded")
	assert.NotContains(t, err.Error(), "delegateTimeout", "the caller's deadline, not the delegate's, ended it")
	assert.Contains(t, err.Error(), "rolled back")

	hanger, child := p.hangerPIDs(t, "c1")
	assert.True(t, proctest.Gone(t, hanger))
	assert.True(t, proctest.Gone(t, child))
	assert.Equal(t, []string{"ADD noop", "ADD hanger", "DEL hanger", "DEL noop"}, p.log(t))
	_, err = p.store.Load(r.Key())
	require.ErrorIs(t, err, cache.ErrNotFound)

	// The lock wait is bounded by the caller's deadline too.
	u, err := p.store.TryLock(r.Key(), cache.Holder{Verb: "DEL"})
	require.NoError(t, err)
	defer func() { require.NoError(t, u.Unlock()) }()
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = p.eng.Add(ctx, r)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 30*time.Second, "not lockTimeout (60s)")
	assert.Equal(t, types.ErrTryAgainLater, cniCode(t, err))
	assert.Contains(t, err.Error(), "locked by pid "+strconv.Itoa(os.Getpid())+" (DEL since")
}
