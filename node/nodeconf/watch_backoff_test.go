package nodeconf

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/internal/ciliumsim"
)

// watchDir starts Watch over a real conf dir holding primary, with an
// hour-long resync, and returns the installer and its log.
func watchDir(t *testing.T, dir string, binDir string) (*Installer, *syncBuffer) {
	t.Helper()
	var logs syncBuffer
	cfg := Config{ConfDir: dir, ConfName: ownName, Catena: CatenaOptions{CacheDir: "/var/lib/cni/catena"}}
	if binDir != "" {
		src := t.TempDir()
		for _, b := range Binaries {
			require.NoError(t, os.WriteFile(filepath.Join(src, b), []byte("#!bin "+b), 0o755))
		}
		cfg.BinDir, cfg.SourceDir = binDir, src
	}
	inst := &Installer{Fs: afero.NewOsFs(), Cfg: cfg, Log: slog.New(slog.NewTextHandler(&logs, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- inst.Watch(ctx, time.Hour) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})
	return inst, &logs
}

// TestWatchBacksOffAnotherWriter: another writer renaming the generated
// file away every 50 ms for 5 s (no Cilium config in the dir) gets one
// quick rewrite, then none for a minute (not one per rename), one warning
// naming the cause, and the status not ready while the file is not in
// place.
func TestWatchBacksOffAnotherWriter(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "10-a.conflist"), []byte(bridgeCL), 0o644))
	inst, logs := watchDir(t, dir, "")
	require.Eventually(t, func() bool { return inst.Status().Ready }, 2*time.Second, 10*time.Millisecond)
	own := filepath.Join(dir, ownName)
	stop := make(chan struct{})
	var loopDone, notReady atomic.Int32
	go func() {
		defer loopDone.Store(1)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				_ = os.Rename(own, own+".cilium_bak") // absent most of the time: nothing to rename
				if inst.Current() != nil {
					notReady.Add(1)
				}
			}
		}
	}()
	time.Sleep(5 * time.Second)
	close(stop)
	require.Eventually(t, func() bool { return loopDone.Load() == 1 }, time.Second, 10*time.Millisecond)
	writes := strings.Count(logs.String(), "wrote the generated conflist") - 1 // the first one
	warns := strings.Count(logs.String(), "level=WARN")
	t.Logf("5 s of renames every 50 ms: %d rewrites, %d warnings, not ready at %d of 100 ticks", writes, warns, notReady.Load())
	assert.Equal(t, 1, writes, "one quick rewrite, then at most one a minute")
	assert.Equal(t, 1, warns, logs.String())
	assert.Contains(t, logs.String(), "by=other")
	assert.Contains(t, inst.Status().Reason, "another writer")
	assert.Greater(t, notReady.Load(), int32(90), "not ready while the file is renamed away")
}

// TestWatchCiliumExclusive: Cilium's exclusive mode (ciliumsim: its
// conflist written, every other config renamed to .cilium_bak at start and
// on every change) is noticed at once, named in the status and the one
// warning, and the agent does not rewrite within the minute.
func TestWatchCiliumExclusive(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cil := &ciliumsim.Exclusive{Dir: dir}
	simDone := make(chan error, 1)
	go func() { simDone <- cil.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-simDone)
	})
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(dir, ciliumsim.ConfName)); return err == nil }, 2*time.Second, 5*time.Millisecond)
	start := time.Now()
	inst, logs := watchDir(t, dir, "")
	require.Eventually(t, func() bool { return strings.Contains(inst.Status().Reason, "exclusive") }, 2*time.Second, time.Millisecond)
	detected := time.Since(start)
	time.Sleep(3 * time.Second)
	writes := strings.Count(logs.String(), "wrote the generated conflist")
	t.Logf("detected %s after the agent started; %d write(s) in %s; Cilium renamed %d file(s) in %d pass(es)",
		detected.Round(time.Millisecond), writes, time.Since(start).Round(time.Second), cil.Renamed.Load(), cil.Passes.Load())
	assert.Equal(t, 1, writes, "the first write only: the next waits a minute")
	assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), logs.String())
	assert.Contains(t, logs.String(), "by=cilium")
	err := inst.Current()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "renamed to "+ownName+".cilium_bak by Cilium's exclusive mode")
	assert.Contains(t, err.Error(), "cni.exclusive: false")
	assert.FileExists(t, filepath.Join(dir, ownName+".cilium_bak"))
}

// TestWatchSweepsStaleTemp: temp files of Catena's own names left by a
// killed agent (regular, ours, old) are removed from the conf dir and the
// bin dir at start; fresh ones, symlinks, other names and other owners'
// files are left.
func TestWatchSweepsStaleTemp(t *testing.T) {
	dir, bin := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "10-a.conflist"), []byte(bridgeCL), 0o644))
	old := time.Now().Add(-time.Hour)
	mk := func(path string, mtime time.Time) {
		require.NoError(t, os.WriteFile(path, []byte("partial"), 0o755))
		require.NoError(t, os.Chtimes(path, mtime, mtime))
	}
	stale := []string{
		filepath.Join(bin, ".catena.0123456789abcdef.tmp"),
		filepath.Join(bin, ".catenactl.fedcba9876543210.tmp"),
		filepath.Join(dir, "."+ownName+".00112233445566aa.tmp"),
	}
	for _, p := range stale {
		mk(p, old)
	}
	kept := []string{
		filepath.Join(bin, ".catena.1111111111111111.tmp"), // fresh: a live writer's
		filepath.Join(bin, ".bridge.0123456789abcdef.tmp"), // not our name
		filepath.Join(bin, ".catena.0123.tmp"),             // not our pattern
		filepath.Join(dir, ".10-a.conflist.0123456789abcdef.tmp"),
	}
	mk(kept[0], time.Now())
	for _, p := range kept[1:] {
		mk(p, old)
	}
	link := filepath.Join(bin, ".catena.2222222222222222.tmp")
	require.NoError(t, os.Symlink(stale[0]+"-target", link))
	foreign := filepath.Join(bin, ".catena.3333333333333333.tmp")
	mk(foreign, old)
	if os.Geteuid() == 0 {
		require.NoError(t, os.Chown(foreign, 65534, 65534))
	}
	inst, logs := watchDir(t, dir, bin)
	require.Eventually(t, func() bool { return inst.Status().Ready }, 2*time.Second, 10*time.Millisecond)
	for _, p := range stale {
		assert.NoFileExists(t, p)
	}
	for _, p := range append(kept, link) {
		_, err := os.Lstat(p)
		assert.NoError(t, err, "kept: %s", p)
	}
	if os.Geteuid() == 0 {
		assert.FileExists(t, foreign, "another owner's file")
	}
	assert.True(t, strings.Contains(logs.String(), "removed a stale temp file"), "logged")
}
