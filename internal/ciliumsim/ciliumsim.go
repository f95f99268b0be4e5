package ciliumsim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/fsnotify/fsnotify"
)

// ConfName and Conf are Cilium's default conflist (chaining mode none).
const (
	ConfName = "05-cilium.conflist"
	Conf     = `{
  "cniVersion": "0.3.1",
  "name": "cilium",
  "plugins": [
    {
       "type": "cilium-cni",
       "enable-debug": false,
       "log-file": "/var/run/cilium/cilium-cni.log"
    }
  ]
}`
)

// Exclusive is one Cilium agent in exclusive mode over a conf dir.
type Exclusive struct {
	Dir string
	// BinDir, if set, gets a cilium-cni executable before the first pass,
	// as Cilium's install puts its plugin in the host's CNI bin dir before
	// its agent writes the conflist naming it (catena-agent does not wrap
	// a primary whose plugin binary is missing). The stub fails every call.
	BinDir string
	// Renamed counts the files renamed to .cilium_bak.
	Renamed atomic.Int64
	// Passes counts the controller's runs.
	Passes atomic.Int64
	// OnRename, if set, is called after each rename with the file's name.
	OnRename func(name string)
}

// Run writes Cilium's conflist and renames the others away, at start and
// after every event in the dir, until ctx is done. The watch is set up
// before the first pass, as Cilium's Start does.
func (e *Exclusive) Run(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching %s: %w", e.Dir, err)
	}
	defer func() { _ = w.Close() }()
	if err := w.Add(e.Dir); err != nil {
		return fmt.Errorf("watching %s: %w", e.Dir, err)
	}
	if err := e.installBinary(); err != nil {
		return err
	}
	if err := e.pass(); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-w.Events:
			if !ok {
				return nil
			}
			// Cilium's controller coalesces triggers: drain what queued.
			for drained := false; !drained; {
				select {
				case <-w.Events:
				default:
					drained = true
				}
			}
			if err := e.pass(); err != nil {
				return err
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			return fmt.Errorf("watching %s: %w", e.Dir, err)
		}
	}
}

// pass is setupCNIConfFile: its own file if it differs, then
// cleanupOtherCNI.
func (e *Exclusive) pass() error {
	e.Passes.Add(1)
	own := filepath.Join(e.Dir, ConfName)
	if cur, err := os.ReadFile(own); err != nil || string(cur) != Conf {
		tmp := own + ".tmp"
		if err := os.WriteFile(tmp, []byte(Conf), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", tmp, err)
		}
		if err := os.Rename(tmp, own); err != nil {
			return fmt.Errorf("renaming %s: %w", tmp, err)
		}
	}
	entries, err := os.ReadDir(e.Dir)
	if err != nil {
		return fmt.Errorf("listing %s: %w", e.Dir, err)
	}
	for _, f := range entries {
		name := f.Name()
		if f.IsDir() || name == ConfName {
			continue
		}
		if !strings.HasSuffix(name, ".conf") && !strings.HasSuffix(name, ".conflist") && !strings.HasSuffix(name, ".json") {
			continue
		}
		// Cilium ignores the error (the file may be gone already).
		if os.Rename(filepath.Join(e.Dir, name), filepath.Join(e.Dir, name+".cilium_bak")) == nil {
			e.Renamed.Add(1)
			if e.OnRename != nil {
				e.OnRename(name)
			}
		}
	}
	return nil
}

// stub is the cilium-cni installBinary writes: every call fails with a CNI
// error, since nothing in these tests calls it.
const stub = "#!/bin/sh\necho '{\"cniVersion\":\"0.3.1\",\"code\":999,\"msg\":\"ciliumsim: cilium-cni is a stub\"}'\nexit 1\n"

// installBinary writes the cilium-cni stub into BinDir, if set.
func (e *Exclusive) installBinary() error {
	if e.BinDir == "" {
		return nil
	}
	path := filepath.Join(e.BinDir, "cilium-cni")
	if err := os.WriteFile(path, []byte(stub), 0o755); err != nil {
		return fmt.Errorf("installing %s: %w", path, err)
	}
	return nil
}
