package libcnientry

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/fileutil"
	"github.com/catena-cni/catena/libchain"
)

// AtDel adopts at DEL time: a DEL through Catena that finds no record of
// (network, containerID, ifname) asks it for the runtime's libcni entry of
// exactly that attachment, <resultsDir>/<network>-<containerID>-<ifname>.
// That is the one window the agent's adoption passes (package node/adopt)
// leave: a pod ADDed through the primary after a pass (its ADD started
// before the runtime reloaded its config) and DELeted through Catena before
// the next one.
//
// The entry is read under the passes' trust rules (the results dir owned
// by Catena's euid, not writable by group or others, never reached through
// a symlink; the entry a regular file of Catena's euid that group and
// others cannot write, at most MaxSize bytes, opened with O_NOFOLLOW) and
// checked as the passes check it: of the DEL's network, named after its
// own content, holding a result, and written by a conflist that is not
// Catena's own (an attachment added through Catena had a record). Its
// record is built as theirs are (record.go). Anything not adoptable is
// logged and leaves the DEL as it was: nothing to tear down.
//
// AtDel takes no lock: the DEL holds the attachment's. After the teardown,
// the Orphan's Settle removes the entry (libcni would, right after the
// DEL), still under that lock, so that an adoption pass racing the DEL,
// once it gets the lock, finds the entry gone and drops the record it
// wrote (its confirm step), and no later pass lists it.
type AtDel struct {
	dir string
	fs  afero.Fs
	log *slog.Logger
	// DirPlugins are appended to an entry's cached list unless it sets
	// loadOnlyInlinedPlugins, as Record's dirPlugins are.
	DirPlugins [][]byte
}

var _ libchain.OrphanFinder = (*AtDel)(nil)

// NewAtDel returns an AtDel on the libcni results dir resultsDir, which
// must be absolute, read through fsys (nil: the OS filesystem, under
// fileutil.TrustedFs's checks); log nil discards.
func NewAtDel(resultsDir string, fsys afero.Fs, log *slog.Logger) (*AtDel, error) {
	if !filepath.IsAbs(resultsDir) {
		return nil, fmt.Errorf("adopt: the libcni results dir %q is not an absolute path", resultsDir)
	}
	if fsys == nil {
		fsys = afero.NewOsFs()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir := filepath.Clean(resultsDir)
	return &AtDel{dir: dir, fs: fileutil.TrustedFs(fsys, dir), log: log}, nil
}

// entryName is the name libcni gives key's cache entry; it never leaves
// the results dir.
func entryName(key cache.Key) (string, error) {
	if err := key.Validate(); err != nil {
		return "", fmt.Errorf("invalid attachment: %w", err)
	}
	name := key.Network + "-" + key.ContainerID + "-" + key.IfName
	if name != filepath.Base(name) || strings.ContainsAny(name, "/\x00") {
		return "", fmt.Errorf("attachment %s: %q is not a plain file name", key, name)
	}
	return name, nil
}

// FindOrphan returns key's attachment as the primary made it, from its
// libcni entry, or nil if there is none to adopt. Only an error reading a
// trusted, well-formed entry is returned, so that the DEL is retried.
func (d *AtDel) FindOrphan(key cache.Key) (*libchain.Orphan, error) {
	name, err := entryName(key)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(d.dir, name)
	fi, err := fileutil.Lstat(d.fs, path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil // also a missing results dir
	case errors.Is(err, fileutil.ErrUntrusted):
		return nil, d.refuse(key, path, err)
	case err != nil:
		return nil, fmt.Errorf("libcni cache entry %s: %w", path, err)
	}
	if err := Vet(path, fi); errors.Is(err, fileutil.ErrUntrusted) {
		return nil, d.refuse(key, path, err)
	} else if err != nil {
		return nil, d.skip(key, path, err)
	}
	data, id, err := Read(d.fs, path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case errors.Is(err, fileutil.ErrUntrusted):
		return nil, d.refuse(key, path, err)
	case err != nil:
		// It passed the lstat's checks: an I/O error, or a file swapped
		// since, which the retried DEL's lstat sees.
		return nil, fmt.Errorf("libcni cache entry %s: %w", path, err)
	}
	rec, err := recordOf(key, name, data, fi, d.DirPlugins)
	if err != nil {
		return nil, d.skip(key, path, err)
	}
	return &libchain.Orphan{Record: rec, Source: path, Settle: func() error { return d.settle(path, id) }}, nil
}

// recordOf checks the entry and builds its record, which must be key's.
func recordOf(key cache.Key, name string, data []byte, fi os.FileInfo, dirPlugins [][]byte) (*cache.Record, error) {
	e, err := parseEntry(name, data, fi.ModTime(), key.Network)
	if err != nil {
		return nil, err
	}
	if e.ContainerID != key.ContainerID || e.IfName != key.IfName {
		return nil, fmt.Errorf("an entry of container %q, ifname %q", e.ContainerID, e.IfName)
	}
	rec, err := buildRecord(e, dirPlugins)
	if err != nil {
		return nil, err
	}
	if rec.Key != key {
		return nil, fmt.Errorf("an entry of attachment %s", rec.Key)
	}
	return rec, nil
}

// settle removes the entry once its attachment is torn down, if it is
// still the version read, durably.
func (d *AtDel) settle(path string, read FileID) error {
	fi, err := fileutil.Lstat(d.fs, path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("libcni cache entry %s: %w", path, err)
	case IDOf(fi) != read:
		return fmt.Errorf("libcni cache entry %s was rewritten since it was adopted: left in place", path)
	}
	if err := d.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the libcni cache entry %s: %w", path, err)
	}
	if err := fileutil.SyncDir(d.fs, d.dir); err != nil {
		return fmt.Errorf("removing the libcni cache entry %s: %w", path, err)
	}
	return nil
}

// skip logs an entry not adopted; it returns nil, the DEL's error.
func (d *AtDel) skip(key cache.Key, path string, why error) error {
	level := slog.LevelWarn
	if errors.Is(why, ErrCatenaOwn) {
		level = slog.LevelDebug
	}
	d.log.Log(context.Background(), level, "DEL found no record; the libcni cache entry of the attachment is not adopted",
		"attachment", key.String(), "file", path, "reason", why.Error())
	return nil
}

// refuse logs an entry not adopted because another user could have
// written it; it returns nil, the DEL's error.
func (d *AtDel) refuse(key cache.Key, path string, why error) error {
	d.log.Error("DEL found no record; the libcni cache entry of the attachment is refused: another user could have written it",
		"attachment", key.String(), "file", path, "reason", why.Error())
	return nil
}
