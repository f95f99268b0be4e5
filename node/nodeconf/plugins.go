package nodeconf

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// ErrPluginMissing: a plugin the primary names is in none of the runtime's
// CNI bin dirs (Config.PluginDirs).
var ErrPluginMissing = errors.New("plugin binary missing")

// checkPlugins returns an error wrapping ErrPluginMissing when the type of
// one of p's plugins (its file's, then its network dir's) is not a regular
// file, symlinks followed, in any of dirs: the runtime would fail every ADD
// with it, as libcni finds a plugin (invoke.FindInPath). A type that is not
// a plain name is left to Wrap, which refuses it. No dirs: nothing is
// checked.
func (i *Installer) checkPlugins(p *Primary) error {
	dirs := i.Cfg.PluginDirs
	if len(dirs) == 0 {
		return nil
	}
	for n, raw := range p.plugins {
		var pl struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(raw, &pl); err != nil || pl.Type == "" || pl.Type != filepath.Base(pl.Type) || strings.HasPrefix(pl.Type, ".") {
			continue // Wrap says why
		}
		found, err := i.findPlugin(dirs, pl.Type)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("primary %s: plugin %d, %q: %w: no such file in %s (--cni-path); every ADD through it would fail. "+
				"Install %q there (the primary's own installer may not have finished), or set --cni-path to the runtime's CNI bin dirs",
				p.File, n, pl.Type, ErrPluginMissing, strings.Join(dirs, ":"), pl.Type)
		}
	}
	return nil
}

// findPlugin reports whether name is a regular file in one of dirs.
func (i *Installer) findPlugin(dirs []string, name string) (bool, error) {
	for _, dir := range dirs {
		fi, err := i.Fs.Stat(filepath.Join(dir, name))
		switch {
		case err == nil && fi.Mode().IsRegular():
			return true, nil
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return false, fmt.Errorf("looking for plugin %q in %s: %w", name, dir, err)
		}
	}
	return false, nil
}
