package nodeconf

import (
	"context"
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
// shortly after any change in the conf dir (fsnotify), and one every resync
// in any case (a missed event, a dir created later, a binary removed). A
// failed Sync is logged (once per distinct reason) and leaves every file in
// place. Watch returns nil when ctx is done; files are never removed.
func (i *Installer) Watch(ctx context.Context, resync time.Duration) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching %s: %w", i.Cfg.ConfDir, err)
	}
	defer w.Close()
	watching := false
	tick := time.NewTicker(resync)
	defer tick.Stop()
	var pending <-chan time.Time
	lastReason := ""
	pass := func() {
		if !watching {
			if err := w.Add(i.Cfg.ConfDir); err == nil {
				watching = true
			} else if lastReason == "" {
				i.Log.Warn("cannot watch the conf dir yet; resyncing periodically", "dir", i.Cfg.ConfDir, "error", err)
			}
		}
		st, err := i.Sync(ctx)
		if err != nil && st.Reason != lastReason {
			i.Log.Warn("not ready", "reason", st.Reason)
		} else if err == nil && lastReason != "" {
			i.Log.Info("ready", "primary", st.Primary)
		}
		lastReason = st.Reason
	}
	pass()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return fmt.Errorf("watching %s: event channel closed", i.Cfg.ConfDir)
			}
			if ev.Has(fsnotify.Remove) && filepath.Clean(ev.Name) == filepath.Clean(i.Cfg.ConfDir) {
				watching = false
			}
			if relevant(ev.Name) && pending == nil {
				pending = time.After(debounce)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return fmt.Errorf("watching %s: error channel closed", i.Cfg.ConfDir)
			}
			i.Log.Warn("watching the conf dir", "dir", i.Cfg.ConfDir, "error", err)
			pending = time.After(debounce)
		case <-pending:
			pending = nil
			pass()
		case <-tick.C:
			pass()
		}
	}
}

// relevant: an event on a config file (not a temp file) may change what is
// generated or what the runtime loads.
func relevant(name string) bool {
	return slices.Contains(confExts, filepath.Ext(name))
}
