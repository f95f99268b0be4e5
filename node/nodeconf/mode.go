package nodeconf

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// confPerm is the widest mode of the generated file: runtimes and tools
// read it.
const confPerm = 0o644

// confMode is the mode the generated file at path must have: the
// permission bits of the primary and of its network dir's plugin files
// masked to at most confPerm (a 0600 file holding a token is never copied
// into a world-readable one), or, if the file in place is narrower still
// (an operator's chmod 600), its own mode, so that the narrower mode
// counts as the same content and survives a rewrite.
func (i *Installer) confMode(path string, p *Primary) (os.FileMode, error) {
	pfi, err := i.Fs.Stat(filepath.Join(i.Cfg.ConfDir, p.File))
	if err != nil {
		return 0, fmt.Errorf("primary %s: %w", p.File, err)
	}
	want := pfi.Mode().Perm() & confPerm
	for _, dp := range p.DirPlugins {
		want &= dp.Mode
	}
	fi, err := i.Fs.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return want, nil
	case err != nil:
		return 0, fmt.Errorf("stat %s: %w", path, err)
	case fi.Mode().IsRegular() && fi.Mode().Perm()&^want == 0:
		return fi.Mode().Perm(), nil
	}
	return want, nil
}
