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

// confMode is the mode the generated file at path must have: the primary's
// permission bits masked to at most confPerm (a 0600 primary holding a
// token is never copied into a world-readable file), or, if the file in
// place is narrower still (an operator's chmod 600), its own mode, so that
// the narrower mode counts as the same content and survives a rewrite.
func (i *Installer) confMode(path, primary string) (os.FileMode, error) {
	pfi, err := i.Fs.Stat(filepath.Join(i.Cfg.ConfDir, primary))
	if err != nil {
		return 0, fmt.Errorf("primary %s: %w", primary, err)
	}
	want := pfi.Mode().Perm() & confPerm
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
