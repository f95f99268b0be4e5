package nodeconf

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"
)

// debounce gathers a burst of events (a primary written in several steps)
// into one Sync.
const debounce = 250 * time.Millisecond

// Watch keeps the installation current until ctx is done: a Sync now, one
// shortly after any change in the conf dir or the primary's network dir
// (fsnotify, watch_netdir.go), and one every resync
// in any case (a missed event, a dir created later, a binary removed). A
// failed Sync is logged (once per distinct reason) and leaves every file in
// place. The watch follows a conf dir renamed away and re-created (it also
// watches the parent, and compares the dir's identity on every pass); the
// first pass and every resync sweep stale temp files (SweepTemp); a
// generated file that someone else takes away (Cilium's cni.exclusive
// renames it to .cilium_bak) is noticed at its event, named in the log and
// readiness, and rewritten at most once a minute while that goes on
// (contest). Watch returns nil when ctx is done, and an error
// wrapping ErrStaleMount when the conf dir is a mount that no longer shows
// the host's dir; files are never removed, but for the generated file when
// Leaving says so as ctx is done (leave.go); the interlock is released
// last.
func (i *Installer) Watch(ctx context.Context, resync time.Duration) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching %s: %w", i.Cfg.ConfDir, err)
	}
	defer func() { _ = w.Close() }()
	defer func() {
		if err := i.Close(); err != nil {
			i.Log.Warn("releasing the interlock", "error", err)
		}
	}()
	dir := filepath.Clean(i.Cfg.ConfDir)
	arm := dirWatch{w: w, dir: dir, log: i.Log}
	arm.parent()
	netDir := netDirWatch{w: w, log: i.Log}
	tick := time.NewTicker(resync)
	defer tick.Stop()
	lastReason := ""
	c := contest{i: i, now: time.Now}
	var pending, rewrite <-chan time.Time
	pass := func(sweep bool) error {
		c.seen()
		arm.rearm(lastReason == "")
		if err := i.StaleMount(); err != nil {
			i.setStatus(Status{Reason: err.Error(), At: time.Now()})
			return err
		}
		if sweep {
			if _, err := i.SweepTemp(); err != nil {
				i.Log.Warn("sweeping stale temp files", "error", err)
			}
		}
		st, err := i.syncHeld(ctx, c.hold())
		// A failed pass keeps (or starts) watching the dir the last good
		// one read: its next write may complete a plugin file. A dir
		// watched only now may have changed between the pass's read and
		// the watch: one more pass reads it again.
		follow := netDir.path
		if err == nil {
			follow = st.NetworkDir
		}
		if netDir.follow(follow) && pending == nil {
			pending = time.After(debounce)
		}
		switch {
		case isHeld(err): // the contest logged it
		case err != nil && st.Reason != lastReason:
			i.Log.Warn("not ready", "reason", st.Reason)
		case err == nil && lastReason != "":
			i.Log.Info("ready", "primary", st.Primary)
		}
		lastReason = st.Reason
		c.observe(st, err)
		rewrite = nil
		if d := c.due(); d > 0 {
			rewrite = time.After(d)
		}
		return nil
	}
	if err := pass(true); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			i.leave()
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return fmt.Errorf("watching %s: event channel closed", dir)
			}
			name := filepath.Clean(ev.Name)
			if name == filepath.Join(dir, i.Cfg.ConfName) {
				c.seen()
				if d := c.due(); d > 0 && rewrite == nil {
					rewrite = time.After(d)
				}
			}
			// The interlock's file: its holder may just have released it.
			if name == dir || (filepath.Dir(name) == dir && (relevant(name) || filepath.Base(name) == LockName && !i.Interlock.Held())) || netDir.relevant(name) {
				if pending == nil {
					pending = time.After(debounce)
				}
			}
		case err, ok := <-w.Errors:
			if !ok {
				return fmt.Errorf("watching %s: error channel closed", dir)
			}
			i.Log.Warn("watching the conf dir", "dir", dir, "error", err)
			pending = time.After(debounce)
		case <-rewrite:
			rewrite = nil
			if err := pass(false); err != nil {
				return err
			}
		case <-pending:
			pending = nil
			if err := pass(false); err != nil {
				return err
			}
		case <-tick.C:
			if err := pass(true); err != nil {
				return err
			}
		}
	}
}

// setStatus records st as the last pass's outcome.
func (i *Installer) setStatus(st Status) {
	i.statusMu.Lock()
	defer i.statusMu.Unlock()
	i.status = st
}

// relevant: an event on a config file (not a temp file) may change what is
// generated or what the runtime loads.
func relevant(name string) bool {
	return slices.Contains(confExts, filepath.Ext(name))
}

// errNoDir is dirWatch's reason when the conf dir cannot be watched.
var errNoDir = errors.New("cannot watch the conf dir yet; resyncing periodically")
