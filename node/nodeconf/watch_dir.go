package nodeconf

import (
	"errors"
	"log/slog"
	"path/filepath"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"
)

// dirID identifies a directory: a dir renamed away and re-created at the
// same path is another dir.
type dirID struct{ dev, ino uint64 }

func statDir(path string) (dirID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return dirID{}, err
	}
	return dirID{dev: st.Dev, ino: st.Ino}, nil
}

// dirWatch keeps an fsnotify watch on the conf dir as it is now: inotify
// watches an inode, so after `mv net.d net.d.old; mkdir net.d` the watch
// would stay on net.d.old. The parent is watched too, so that the dir's
// rename, removal and re-creation are events (filtered by name).
type dirWatch struct {
	w        *fsnotify.Watcher
	dir      string
	log      *slog.Logger
	watching bool
	id       dirID
}

// parent watches the conf dir's parent, if it can: without it a re-created
// dir is found at the next resync.
func (d *dirWatch) parent() {
	if err := d.w.Add(filepath.Dir(d.dir)); err != nil {
		d.log.Warn("cannot watch the conf dir's parent; a re-created conf dir is found at the next resync", "dir", filepath.Dir(d.dir), "error", err)
	}
}

// rearm (re)adds the watch if the dir is not watched or is another dir
// than the one watched; it logs a failure when loud.
func (d *dirWatch) rearm(loud bool) {
	id, err := statDir(d.dir)
	if err == nil && d.watching && id == d.id {
		return
	}
	if d.watching {
		// The old inode's watch, if fsnotify has not dropped it already
		// (it does on IN_MOVE_SELF and IN_DELETE_SELF).
		if rerr := d.w.Remove(d.dir); rerr != nil && !errors.Is(rerr, fsnotify.ErrNonExistentWatch) {
			d.log.Warn("removing the watch of the replaced conf dir", "dir", d.dir, "error", rerr)
		}
		d.watching = false
		d.log.Info("the conf dir was replaced or removed; watching it anew", "dir", d.dir)
	}
	if err == nil {
		err = d.w.Add(d.dir)
	}
	if err != nil {
		if loud {
			d.log.Warn(errNoDir.Error(), "dir", d.dir, "error", err)
		}
		return
	}
	d.watching, d.id = true, id
}
