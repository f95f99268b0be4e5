package nodeconf

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/internal/clitest"
)

// syncBuffer is a log sink safe for the watch goroutine and the test.
type syncBuffer = clitest.SyncBuffer

// watching is an Installer watching a real conf dir holding bridgeCL as
// 10-a.conflist, with an hour-long resync, once ready.
type watching struct {
	inst   *Installer
	dir    string
	logs   *syncBuffer
	cancel context.CancelFunc
	done   chan error
}

func startWatching(t *testing.T) *watching {
	t.Helper()
	return startWatchingWith(t, nil)
}

// startWatchingWith is startWatching, with set applied to the Installer
// before its watch starts.
func startWatchingWith(t *testing.T, set func(*Installer)) *watching {
	t.Helper()
	w := &watching{dir: t.TempDir(), logs: &syncBuffer{}, done: make(chan error, 1)}
	require.NoError(t, os.WriteFile(filepath.Join(w.dir, "10-a.conflist"), []byte(bridgeCL), 0o644))
	w.inst = &Installer{
		Fs:  afero.NewOsFs(),
		Cfg: Config{ConfDir: w.dir, ConfName: ownName, Catena: CatenaOptions{CacheDir: "/var/lib/cni/catena"}},
		Log: slog.New(slog.NewTextHandler(w.logs, nil)),
	}
	if set != nil {
		set(w.inst)
	}
	var ctx context.Context
	ctx, w.cancel = context.WithCancel(context.Background())
	go func() { w.done <- w.inst.Watch(ctx, time.Hour) }()
	t.Cleanup(func() {
		w.cancel()
		assert.NoError(t, <-w.done)
	})
	require.Eventually(t, func() bool { return w.inst.Status().Ready }, 2*time.Second, 20*time.Millisecond)
	return w
}

// generated is the generated file's content, or "".
func (w *watching) generated() string {
	data, _ := os.ReadFile(filepath.Join(w.dir, ownName))
	return string(data)
}

// TestWatchFollowsPrimary, on a real dir with fsnotify and an hour-long
// resync: an edit of the primary is wrapped within 2 s; a half-written
// primary leaves the last good file and the status not ready, with the
// reason logged; the completed write is wrapped; the watch ends on cancel
// leaving the file.
func TestWatchFollowsPrimary(t *testing.T) {
	w := startWatching(t)
	inst, logs, generated := w.inst, w.logs, w.generated
	primary := filepath.Join(w.dir, "10-a.conflist")
	own := filepath.Join(w.dir, ownName)

	edited := `{"cniVersion":"1.0.0","name":"podnet","plugins":[{"type":"bridge"},{"type":"tuning","sysctl":{"net.core.somaxconn":"512"}}]}`
	start := time.Now()
	require.NoError(t, os.WriteFile(primary, []byte(edited), 0o644))
	require.Eventually(t, func() bool { return bytes.Contains([]byte(generated()), []byte("somaxconn")) }, 2*time.Second, 10*time.Millisecond)
	t.Logf("edit wrapped after %s", time.Since(start).Round(time.Millisecond))
	good := generated()

	f, err := os.OpenFile(primary, os.O_WRONLY|os.O_TRUNC, 0)
	require.NoError(t, err)
	_, err = f.WriteString(bridgeCL[:60])
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !inst.Status().Ready }, 2*time.Second, 10*time.Millisecond)
	assert.Contains(t, inst.Status().Reason, "not valid JSON")
	assert.Equal(t, good, generated(), "the last good file stays")
	assert.Contains(t, logs.String(), "not ready")

	_, err = f.WriteString(bridgeCL[60:])
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Eventually(t, func() bool { return inst.Status().Ready && bytes.Contains([]byte(generated()), []byte("bandwidth")) }, 2*time.Second, 10*time.Millisecond)

	w.cancel()
	require.NoError(t, <-w.done)
	w.done <- nil // for the cleanup
	assert.FileExists(t, own, "the generated file stays after the watch ends")
}

// TestWatchFollowsNetworkDir, on a real dir with fsnotify and an hour-long
// resync: the primary's network dir created with a plugin file, the file
// edited, then removed, is each wrapped within 2 s, not at the next resync
// (fsnotify watches no subdirectory by itself).
func TestWatchFollowsNetworkDir(t *testing.T) {
	w := startWatching(t)
	inst, generated := w.inst, w.generated
	netDir := filepath.Join(w.dir, "podnet")
	plugin := filepath.Join(netDir, "10-tuning.conf")
	for _, step := range []struct {
		name string
		do   func() error
		want func(string) bool
	}{
		{"dir and file created", func() error {
			if err := os.Mkdir(netDir, 0o755); err != nil {
				return err
			}
			return os.WriteFile(plugin, []byte(`{"type":"tuning","mtu":1400}`), 0o644)
		}, func(g string) bool { return strings.Contains(g, `"mtu": 1400`) }},
		{"file edited", func() error { return os.WriteFile(plugin, []byte(`{"type":"tuning","mtu":1300}`), 0o644) },
			func(g string) bool { return strings.Contains(g, `"mtu": 1300`) }},
		{"file removed", func() error { return os.Remove(plugin) },
			func(g string) bool { return !strings.Contains(g, "tuning") }},
	} {
		// The pass that follows the event of the last write has run: only
		// an event of the step's own can trigger the next.
		time.Sleep(3 * debounce)
		start := time.Now()
		require.NoError(t, step.do(), step.name)
		require.Eventually(t, func() bool { return step.want(generated()) }, 2*time.Second, 10*time.Millisecond, step.name)
		t.Logf("%s: wrapped after %s", step.name, time.Since(start).Round(time.Millisecond))
	}

	// A half-written plugin file: not ready, the last good file stays;
	// the completing write is an event too.
	time.Sleep(3 * debounce)
	good := generated()
	f, err := os.Create(plugin)
	require.NoError(t, err)
	_, err = f.WriteString(`{"type":"tun`)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !inst.Status().Ready }, 2*time.Second, 10*time.Millisecond)
	assert.Contains(t, inst.Status().Reason, "podnet/10-tuning.conf: not valid JSON")
	assert.Equal(t, good, generated())
	time.Sleep(3 * debounce)
	_, err = f.WriteString(`ing","mtu":1200}`)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Eventually(t, func() bool { return inst.Status().Ready && strings.Contains(generated(), `"mtu": 1200`) }, 2*time.Second, 10*time.Millisecond)
}
