// Command runcwrap is the OCI runtime the CRI-O integration tests give
// CRI-O: it runs runc (the path linked in as main.runc) with the same
// arguments, after raising the oomScoreAdj of the spec it is given to this
// process's own oom_score_adj. CRI-O asks -998 for every pause container,
// and a root without CAP_SYS_RESOURCE (as in a test container) cannot
// lower oom_score_adj below its own: runc would fail every sandbox.
// containerd's restrict_oom_score_adj does the same for its CRI.
//
// It edits the bundle's config.json before create and run (--bundle, -b,
// else the current dir) and the --process (-p) file before exec, through a
// temp file and a rename.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// runc is the real runtime, set at link time.
var runc = "/usr/sbin/runc"

func main() {
	if err := raise(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "runcwrap: %v\n", err)
		os.Exit(1)
	}
	err := syscall.Exec(runc, append([]string{runc}, os.Args[1:]...), os.Environ())
	fmt.Fprintf(os.Stderr, "runcwrap: exec %s: %v\n", runc, err)
	os.Exit(1)
}

// raise finds the spec the command reads, if any, and raises its
// oomScoreAdj.
func raise(args []string) error {
	cmd, rest := command(args)
	switch cmd {
	case "create", "run":
		bundle := flagValue(rest, "--bundle", "-b")
		if bundle == "" {
			bundle = "."
		}
		return raiseIn(filepath.Join(bundle, "config.json"), true)
	case "exec":
		if p := flagValue(rest, "--process", "-p"); p != "" {
			return raiseIn(p, false)
		}
	}
	return nil
}

// globalWithValue are runc's global flags that take a value.
var globalWithValue = map[string]bool{"--log": true, "--log-format": true, "--root": true, "--criu": true, "--rootless": true}

// command splits runc's arguments at its subcommand.
func command(args []string) (string, []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return a, args[i+1:]
		}
		if globalWithValue[a] {
			i++
		}
	}
	return "", nil
}

// flagValue is the value of the first of names in args (--name value,
// --name=value, -n value).
func flagValue(args []string, names ...string) string {
	for i, a := range args {
		for _, n := range names {
			if a == n && i+1 < len(args) {
				return args[i+1]
			}
			if v, ok := strings.CutPrefix(a, n+"="); ok {
				return v
			}
		}
	}
	return ""
}

// raiseIn sets the oomScoreAdj of the spec at path (a whole config.json
// when whole, else a process.json) to at least this process's own.
func raiseIn(path string, whole bool) error {
	own, err := ownScore()
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the spec: %w", err)
	}
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	proc := spec
	if whole {
		p, ok := spec["process"].(map[string]any)
		if !ok {
			return nil
		}
		proc = p
	}
	cur, ok := proc["oomScoreAdj"].(float64)
	if !ok || int(cur) >= own {
		return nil
	}
	proc["oomScoreAdj"] = own
	out, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".runcwrap-*")
	if err != nil {
		return fmt.Errorf("rewriting the spec: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(out); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("rewriting the spec: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("rewriting the spec: %w", err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("rewriting the spec: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rewriting the spec: %w", err)
	}
	return nil
}

// ownScore is this process's oom_score_adj.
func ownScore() (int, error) {
	raw, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return 0, fmt.Errorf("reading own oom_score_adj: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return 0, fmt.Errorf("parsing own oom_score_adj: %w", err)
	}
	return n, nil
}
