package nodeconf

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/spf13/afero"
)

// confExts are the extensions runtimes load from the conf dir (libcni's
// ConfFiles as containerd's go-cni and CRI-O call it).
var confExts = []string{".conf", ".conflist", ".json"}

// ConfFiles returns the base names of dir's network config files in the
// order a runtime tries them: lexical. A missing dir has none.
func ConfFiles(fsys afero.Fs, dir string) ([]string, error) {
	entries, err := afero.ReadDir(fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing conf dir %s: %w", dir, err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && slices.Contains(confExts, filepath.Ext(e.Name())) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

// AutoPrimary returns the name the runtime would load if Catena's own file
// (own) were not there: the lexically first config file other than own.
func AutoPrimary(files []string, own string) (string, error) {
	for _, f := range files {
		if f != own {
			return f, nil
		}
	}
	return "", fmt.Errorf("%w: no .conf, .conflist or .json file besides %s", ErrNoPrimary, own)
}

// shadowing returns the config files that sort before own: the runtime
// loads the first of them instead of Catena's file.
func shadowing(files []string, own string) []string {
	var before []string
	for _, f := range files {
		if f >= own {
			break
		}
		before = append(before, f)
	}
	return before
}
