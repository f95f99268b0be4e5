package nodeconf

import (
	"errors"
	"log/slog"
	"path/filepath"

	"github.com/fsnotify/fsnotify"
)

// netDirWatch keeps an fsnotify watch on the primary's network dir, which
// the conf dir's watch does not cover: a plugin file added to, changed in
// or removed from it changes what the runtime runs. The dir's creation,
// removal or rename is an event of the conf dir, by its name.
type netDirWatch struct {
	w        *fsnotify.Watcher
	log      *slog.Logger
	path     string // "" while the runtime reads no network dir
	watching bool
	id       dirID
}

// follow watches path, the network dir the last good pass read (or none),
// anew if it is another dir than the one watched; it reports whether it
// added a watch.
func (d *netDirWatch) follow(path string) bool {
	if path != d.path && d.watching {
		d.unwatch()
	}
	d.path = path
	if path == "" {
		return false
	}
	id, err := statDir(path)
	if err != nil {
		// Missing: its creation is an event of the conf dir. A removed
		// dir's watch is gone with it.
		d.watching = false
		return false
	}
	if d.watching && id == d.id {
		return false
	}
	if d.watching {
		d.unwatch()
	}
	if err := d.w.Add(path); err != nil {
		d.log.Warn("cannot watch the primary's network dir; a change in it is wrapped at the next resync", "dir", path, "error", err)
		return false
	}
	d.watching, d.id = true, id
	return true
}

func (d *netDirWatch) unwatch() {
	if err := d.w.Remove(d.path); err != nil && !errors.Is(err, fsnotify.ErrNonExistentWatch) {
		d.log.Warn("removing the watch of the network dir", "dir", d.path, "error", err)
	}
	d.watching = false
}

// relevant: an event on the network dir itself (seen in the conf dir) or
// on a plugin file in it.
func (d *netDirWatch) relevant(name string) bool {
	return d.path != "" && (name == d.path || filepath.Dir(name) == d.path && filepath.Ext(name) == ".conf")
}
