package nodeconf

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// Current checks, for readiness, what is on disk now rather than what the
// last pass saw: the last pass succeeded, the conf dir is not a stale
// mount, the generated file is present with the content and mode the agent
// would write from the primary as it is now (a narrower mode counts as the
// same), and no file sorts before it. A file renamed away by Cilium's
// exclusive mode is named as such (Taken). It reads the files but never waits
// for a pass.
func (i *Installer) Current() error {
	st := i.Status()
	switch {
	case st.At.IsZero():
		return errors.New("no pass yet")
	case !st.Ready:
		return errors.New(st.Reason)
	}
	if err := i.StaleMount(); err != nil {
		return err
	}
	p, err := LoadPrimary(i.Fs, i.Cfg.ConfDir, st.Primary, i.Cfg.NetworkDir)
	if err != nil {
		return fmt.Errorf("%w (since the last pass)", err)
	}
	out, err := Wrap(p, i.Cfg.Catena)
	if err != nil {
		return fmt.Errorf("%w (since the last pass)", err)
	}
	if err := i.checkPlugins(p); err != nil {
		return fmt.Errorf("%w (since the last pass)", err)
	}
	path := filepath.Join(i.Cfg.ConfDir, i.Cfg.ConfName)
	perm, err := i.confMode(path, p)
	if err != nil {
		return err
	}
	same, err := sameContent(i.Fs, path, bytes.NewReader(out), int64(len(out)), perm)
	if err != nil {
		return err
	}
	if !same {
		t, err := WhoTook(i.Fs, i.Cfg.ConfDir, i.Cfg.ConfName)
		switch {
		case err != nil:
			return fmt.Errorf("%s is missing or is not what catena-agent writes for %s, and %w", path, p.File, err)
		case t.By() == TakenByCilium:
			return t
		}
		return fmt.Errorf("%s is missing or is not what catena-agent writes for %s (removed or changed by another writer, or the primary changed since the last pass)", path, p.File)
	}
	files, err := ConfFiles(i.Fs, i.Cfg.ConfDir)
	if err != nil {
		return err
	}
	if before := shadowing(files, i.Cfg.ConfName); len(before) > 0 {
		return fmt.Errorf("%s sorts before %s: the runtime loads it instead of catena's file", strings.Join(before, ", "), i.Cfg.ConfName)
	}
	return nil
}
