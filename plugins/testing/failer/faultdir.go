package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
)

// dirFaults are the faults the files in faultDir turn on for one verb, for
// the chaos soak, which creates and removes them while the chain runs:
//
//	fail-add, fail-del   fail that verb with errorCode
//	hang-add, hang-del   sleep the duration the file holds ("70s") first
//	kill-add             SIGKILL the parent during ADD, if it is catena
type dirFaults struct {
	fail bool
	hang time.Duration
	kill bool
}

// readDirFaults reads faultDir's files for verb ("add" or "del").
func readDirFaults(dir, verb string) (dirFaults, error) {
	var f dirFaults
	if dir == "" {
		return f, nil
	}
	var err error
	if f.fail, err = exists(filepath.Join(dir, "fail-"+verb)); err != nil {
		return f, err
	}
	if f.kill, err = exists(filepath.Join(dir, "kill-"+verb)); err != nil {
		return f, err
	}
	raw, err := os.ReadFile(filepath.Join(dir, "hang-"+verb))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return f, fmt.Errorf("failer: read faultDir: %w", err)
	default:
		if f.hang, err = parseDuration("hang-"+verb, strings.TrimSpace(string(raw))); err != nil {
			return f, err
		}
	}
	return f, nil
}

func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("failer: stat %s: %w", path, err)
	}
}

// applyDirFaults hangs, kills the parent or fails verb as faultDir says,
// in that order, and logs what it did to logFile.
func (c *NetConf) applyDirFaults(verb string, args *skel.CmdArgs) error {
	f, err := readDirFaults(c.FaultDir, strings.ToLower(verb))
	if err != nil {
		return types.NewError(types.ErrIOFailure, err.Error(), "")
	}
	if f.hang > 0 {
		time.Sleep(f.hang)
	}
	if f.kill {
		if err := killCatenaParent(); err != nil {
			return types.NewError(types.ErrIOFailure, err.Error(), "")
		}
		_ = logInvocation(c.LogFile, verb+"-KILLED-PARENT", args)
		return types.NewError(c.errorCode(), "failer: killed its parent", "")
	}
	if f.fail {
		_ = logInvocation(c.LogFile, verb+"-FAILED", args)
		return c.injected(c.errorCode(), verb, args)
	}
	return nil
}

// killCatenaParent sends SIGKILL to the parent process if its command is
// catena (never to a runtime that calls failer directly).
func killCatenaParent() error {
	ppid := os.Getppid()
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", ppid))
	if err != nil {
		return fmt.Errorf("failer: read the parent's comm: %w", err)
	}
	if name := strings.TrimSpace(string(comm)); name != "catena" {
		return fmt.Errorf("failer: kill-add: the parent is %q, not catena", name)
	}
	if err := syscall.Kill(ppid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("failer: kill the parent %d: %w", ppid, err)
	}
	return nil
}
