package nodeconf

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cli/clitest"
)

// syncBuffer is a log sink safe for the watch goroutine and the test.
type syncBuffer = clitest.SyncBuffer

// TestWatchFollowsPrimary, on a real dir with fsnotify and an hour-long
// resync: an edit of the primary is wrapped within 2 s; a half-written
// primary leaves the last good file and the status not ready, with the
// reason logged; the completed write is wrapped; the watch ends on cancel
// leaving the file.
func TestWatchFollowsPrimary(t *testing.T) {
	dir := t.TempDir()
	primary := filepath.Join(dir, "10-a.conflist")
	require.NoError(t, os.WriteFile(primary, []byte(bridgeCL), 0o644))
	var logs syncBuffer
	inst := &Installer{
		Fs:  afero.NewOsFs(),
		Cfg: Config{ConfDir: dir, ConfName: ownName, Catena: CatenaOptions{CacheDir: "/var/lib/cni/catena"}},
		Log: slog.New(slog.NewTextHandler(&logs, nil)),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- inst.Watch(ctx, time.Hour) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	own := filepath.Join(dir, ownName)
	generated := func() string {
		data, _ := os.ReadFile(own)
		return string(data)
	}
	require.Eventually(t, func() bool { return inst.Status().Ready }, 2*time.Second, 20*time.Millisecond)

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

	cancel()
	require.NoError(t, <-done)
	done <- nil // for the cleanup
	assert.FileExists(t, own, "the generated file stays after the watch ends")
}
