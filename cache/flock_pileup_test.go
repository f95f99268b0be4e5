//go:build linux

package cache

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockFilesUnder lists every regular file below dir (lock files, and
// anything else that would pile up).
func lockFilesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			out = append(out, path)
		}
		return nil
	})
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	return out
}

// TestFlockHolderFileContent: while held, the lock file is exactly the
// holder as JSON: pid, verb and since (RFC 3339), and the full key (the
// file name of a long key is hashed).
func TestFlockHolderFileContent(t *testing.T) {
	dir := t.TempDir()
	l := NewFlockLocker(dir)
	since := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	u, err := l.TryLock(testKey("abc"), Holder{Verb: "CHECK", Since: since})
	require.NoError(t, err)
	t.Cleanup(func() { _ = u.Unlock() })

	data, err := os.ReadFile(filepath.Join(dir, "podnet", "abc:eth0.lock"))
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(data, &got))
	assert.Equal(t, map[string]any{
		"pid": float64(os.Getpid()), "verb": "CHECK", "since": "2030-01-02T03:04:05Z",
		"key": map[string]any{"network": "podnet", "containerID": "abc", "ifName": "eth0"},
	}, got)
}

// TestFlockLockFilesDoNotPileUp: many attachments on several networks,
// locked concurrently and with contention, leave no lock file behind: only
// one directory per network.
func TestFlockLockFilesDoNotPileUp(t *testing.T) {
	dir := t.TempDir()
	l := NewFlockLocker(dir)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 150 {
				// goroutines overlap on keys: contention on the same file
				key := Key{Network: fmt.Sprintf("net%d", i%3), ContainerID: fmt.Sprintf("c%d", (i+g*7)%60), IfName: "eth0"}
				u, err := l.Lock(context.Background(), key, Holder{Verb: "ADD"})
				if err != nil {
					errs <- err
					return
				}
				if err := u.Unlock(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.Empty(t, lockFilesUnder(t, dir), "no lock file is left once nothing is held")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{"net0", "net1", "net2"}, names, "one dir per network, no more")
}

// TestFlockDeadHolderFileIsReclaimed: a holder killed with SIGKILL cannot
// unlink its lock file. The kernel drops its flock at once, so the next
// operation gets the lock without waiting, takes the file over (its holder
// line now names the new holder) and removes it on Unlock: a dead holder's
// file lasts until the next operation on that attachment, never longer.
func TestFlockDeadHolderFileIsReclaimed(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a subprocess")
	}
	dir := t.TempDir()
	cmd := startLockHolder(t, dir)

	path := filepath.Join(dir, "podnet", "abc:eth0.lock")
	l, key := NewFlockLocker(dir), testKey("abc")
	h := l.readHolder(key)
	require.NotNil(t, h)
	assert.Equal(t, cmd.Process.Pid, h.PID)

	require.NoError(t, cmd.Process.Kill()) // SIGKILL: no Unlock, no unlink
	_ = cmd.Wait()
	_, err := os.Lstat(path)
	require.NoError(t, err, "the dead holder's file is still there")

	u, err := l.TryLock(key, Holder{Verb: "DEL"})
	require.NoError(t, err, "free at once: no wait, no stale-PID check")
	h = l.readHolder(key)
	require.NotNil(t, h)
	assert.Equal(t, os.Getpid(), h.PID)
	assert.Equal(t, "DEL", h.Verb)
	require.NoError(t, u.Unlock())
	assert.Empty(t, lockFilesUnder(t, dir))
}
