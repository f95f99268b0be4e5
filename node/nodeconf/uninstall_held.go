package nodeconf

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/spf13/afero"
)

// ErrAgentRunning: an agent still holds the conf dir.
var ErrAgentRunning = errors.New("a catena-agent still runs on this node")

// ErrRewritten: the generated file came back after its removal.
var ErrRewritten = errors.New("the generated file was written again after its removal")

// UninstallOptions are UninstallHeld's.
type UninstallOptions struct {
	ConfDir, ConfName, BinDir string
	// Holder describes the uninstalling process in the interlock.
	Holder string
	// AgentTimeout bounds the wait for the agents holding the conf dir to
	// exit.
	AgentTimeout time.Duration
	// Settle is how long the file must stay removed: longer than an
	// agent's debounce, so that an agent that does not honour the
	// interlock (an older version) is caught.
	Settle time.Duration
	// Waiting, if set, is told once that uninstall waits, and for whom.
	Waiting func(reason string)
}

// lockPoll is how often UninstallHeld retries the interlock.
const lockPoll = 50 * time.Millisecond

// UninstallHeld takes the conf dir's interlock, waiting up to AgentTimeout
// for the agents holding it to exit, then Uninstalls, then checks for
// Settle that the generated file stays removed. On success it returns the
// interlock still held: while the caller holds it, an agent that starts
// writes nothing; the caller Unlocks when it ends. On any error the
// interlock is released.
func UninstallHeld(ctx context.Context, fsys afero.Fs, o UninstallOptions) (Uninstalled, *DirLock, error) {
	l := NewDirLock(o.ConfDir, o.Holder)
	if err := waitLock(ctx, l, o); err != nil {
		return Uninstalled{}, nil, err
	}
	u, err := Uninstall(fsys, o.ConfDir, o.ConfName, o.BinDir)
	if err == nil {
		err = settle(ctx, fsys, filepath.Join(o.ConfDir, o.ConfName), l, o.Settle)
	}
	if err != nil {
		return u, nil, errors.Join(err, l.Unlock())
	}
	return u, l, nil
}

// waitLock takes l, waiting up to o.AgentTimeout. A missing conf dir has
// nothing to lock (and nothing to uninstall).
func waitLock(ctx context.Context, l *DirLock, o UninstallOptions) error {
	deadline := time.Now().Add(o.AgentTimeout)
	told := false
	for {
		_, err := l.TryLock()
		switch {
		case err == nil, errors.Is(err, fs.ErrNotExist):
			return nil
		case !errors.Is(err, ErrHeld):
			return err
		case time.Now().After(deadline):
			return fmt.Errorf("%w: %w after %s; delete its DaemonSet and wait for its pods to be gone "+
				"(kubectl -n catena-system wait --for=delete pod -l app.kubernetes.io/component=agent), then run uninstall again",
				ErrAgentRunning, err, o.AgentTimeout)
		}
		if !told && o.Waiting != nil {
			o.Waiting(err.Error())
			told = true
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", l.Path, ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}

// settle checks for d that path stays absent.
func settle(ctx context.Context, fsys afero.Fs, path string, l *DirLock, d time.Duration) error {
	end := time.Now().Add(d)
	for {
		if _, err := fsys.Stat(path); err == nil {
			return fmt.Errorf("%s: %w: a catena-agent that does not honour the interlock %s (an older version?) still runs; "+
				"delete its DaemonSet, wait for its pods to be gone, then run uninstall again", path, ErrRewritten, l.Path)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("stat %s: %w", path, err)
		}
		if !time.Now().Before(end) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("checking that %s stays removed: %w", path, ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}
