package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	cniinvoke "github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/spf13/cobra"

	"github.com/catena-cni/catena/libchain"
	"github.com/catena-cni/catena/libchain/invoke"
	"github.com/catena-cni/catena/libchain/release"
)

// versionTimeout bounds each plugin's answer to VERSION.
const versionTimeout = 10 * time.Second

const (
	statusOK      = "ok"
	statusProblem = "problem"
)

// check is one finding of doctor.
type check struct {
	Check  string `json:"check"`
	Status string `json:"status"` // ok or problem
	Detail string `json:"detail"`
	// Items lists each offending path, record or lock holder.
	Items []string `json:"items,omitempty"`
	Hint  string   `json:"hint,omitempty"`
}

func ok(name, detail string) check { return check{Check: name, Status: statusOK, Detail: detail} }

func problem(name, detail, hint string, items ...string) check {
	return check{Check: name, Status: statusProblem, Detail: detail, Hint: hint, Items: items}
}

// doctorOutput is what `doctor --json` prints.
type doctorOutput struct {
	// Catenactl is the version and commit of the catenactl that checked.
	Catenactl string  `json:"catenactl"`
	OK        bool    `json:"ok"`
	Checks    []check `json:"checks"`
}

func (a *app) doctorCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check this node's Catena setup; each check is ok or a problem with a hint",
		Long: `Check this node's Catena setup and report each check as ok, or as a problem
with a hint:
  config         the catena config parses and validates;
  catena plugin  the catena binary is in CNI_PATH and answers VERSION with the
                 config's cniVersion among its supported versions;
  delegate N     likewise for each delegate's binary and the cniVersion
                 catena calls it with; for cniVersion "auto", a version
                 the binary shares with catena, and which one catena calls
                 it at;
  network dir    only if <conf dir>/<network>/ exists: its *.conf plugin
                 files, which libcni v1.3 (containerd 2.1+, CRI-O 1.33+) runs
                 after a conflist's own plugins unless the conflist sets
                 loadOnlyInlinedPlugins: wrapped by catena-agent and
                 unchanged, not read, or a problem (run after catena,
                 outside its records; changed since wrapped; a file libcni
                 refuses);
  conf dir       only if a conflist catena-agent generated was renamed to
                 <name>.cilium_bak (Cilium's cni.exclusive, its default,
                 renames every other config so): a problem, naming Cilium and
                 the fix, while the generated file is not back;
  cache dir      root-owned (the owner catena runs as), dirs 0700, files
                 0600, no symlinks, writable;
  records        no record stuck in teardown (a failed rollback or DEL, or an
                 operation whose process died) and none unreadable;
  locks          no attachment lock held by a process that is gone or for
                 longer than lockTimeout (each holder is reported as recorded
                 in its lock file).
The output starts with catenactl's own version and commit (--json: the
catenactl field). Doctor changes nothing (it runs each plugin's VERSION
only) and exits 1 if it found a problem.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			checks := a.diagnose(cmd.Context())
			out := doctorOutput{Catenactl: release.String(), OK: true, Checks: checks}
			problems := 0
			for _, c := range checks {
				if c.Status != statusOK {
					out.OK = false
					problems++
				}
			}
			var err error
			if a.json {
				err = writeJSON(a.stdout, out)
			} else {
				err = printDoctor(a, out)
			}
			if err != nil {
				return err
			}
			if problems > 0 {
				return fmt.Errorf("doctor found %d problem(s)", problems)
			}
			return nil
		},
	}
}

// diagnose runs every check that the config (or --cache-dir) allows.
func (a *app) diagnose(ctx context.Context) []check {
	conf, path, err := a.loadConf()
	var checks []check
	lockTimeout := libchain.DefaultLockTimeout
	cacheDir := a.cacheDir
	if err != nil {
		checks = append(checks, problem("config", err.Error(),
			"fix the file (the message names the field): catena refuses this config on every call; or pass --conf"))
	} else {
		checks = append(checks, ok("config", fmt.Sprintf("%s: network %q, cniVersion %s, %d delegate(s), cacheDir %s",
			path, conf.Name, conf.CNIVersion, len(conf.Delegates), conf.CacheDir)))
		cniPath := a.resolveCNIPath()
		checks = append(checks, pluginCheck(ctx, "catena plugin", "catena", conf.CNIVersion, cniPath, "the network's cniVersion"))
		for _, d := range conf.Delegates {
			field := fmt.Sprintf("delegates[%d].cniVersion", d.Index)
			want := d.CNIVersion
			if d.Auto {
				want = libchain.AutoVersion
			}
			checks = append(checks, pluginCheck(ctx, d.String(), d.Type, want, cniPath, field))
		}
		if c, found := networkDirCheck(path, conf.Name); found {
			checks = append(checks, c)
		}
		lockTimeout, cacheDir = conf.LockTimeout, conf.CacheDir
	}
	confDir := a.netDir
	if a.confPath != "" {
		confDir = filepath.Dir(a.confPath)
	}
	if c, found := confDirCheck(confDir); found {
		checks = append(checks, c)
	}
	if cacheDir == "" {
		return append(checks, problem("cache dir", "unknown: the config did not load and --cache-dir is not set",
			"fix the config, or pass --cache-dir to check the cache dir anyway"))
	}
	cacheDir = filepath.Clean(cacheDir)
	return append(checks,
		cacheDirCheck(cacheDir, a.ownerUID),
		recordsCheck(cacheDir),
		locksCheck(cacheDir, lockTimeout, a.now()))
}

// pluginCheck finds plugin typ in cniPath and asks it VERSION: it must
// support want, the version catena calls it with; with want "auto", it must
// share a version with catena, and the check says which catena calls it at.
func pluginCheck(ctx context.Context, name, typ, want, cniPath, field string) check {
	dirs := invoke.CNIPathDirs(cniPath)
	p, err := cniinvoke.FindInPath(typ, dirs)
	if err != nil {
		return problem(name, fmt.Sprintf("%q not found in CNI_PATH %s", typ, cniPath),
			fmt.Sprintf("install the %s plugin into one of those dirs, or pass --cni-path", typ))
	}
	vctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	asked := want
	if want == libchain.AutoVersion {
		asked = version.Current()
	}
	stdin := fmt.Appendf(nil, `{"cniVersion":%q}`, asked)
	e := &invoke.ProcExec{}
	env := (&cniinvoke.Args{Command: "VERSION", NetNS: "dummy", IfName: "dummy", Path: cniPath}).AsEnv()
	out, err := e.ExecPlugin(vctx, p, stdin, env)
	if err != nil {
		return problem(name, fmt.Sprintf("%s does not answer VERSION: %v", p, err),
			fmt.Sprintf("check that it runs on this node: CNI_COMMAND=VERSION %s </dev/null", p))
	}
	info, err := e.Decode(out)
	if err != nil {
		return problem(name, fmt.Sprintf("%s answers VERSION with something that does not parse: %v", p, err),
			"replace it with a CNI plugin build")
	}
	supported := info.SupportedVersions()
	if want == libchain.AutoVersion {
		v, err := libchain.Negotiate(supported)
		if err != nil {
			return problem(name, fmt.Sprintf("%s: cniVersion auto: %v: catena refuses to call it", p, err),
				fmt.Sprintf("upgrade the plugin, or set %s to a version it supports", field))
		}
		return ok(name, fmt.Sprintf("%s supports %s: catena calls it at %s (cniVersion auto)", p, strings.Join(supported, ", "), v))
	}
	if !slices.Contains(supported, want) {
		return problem(name, fmt.Sprintf("%s supports %s, not cniVersion %s that catena calls it with", p, strings.Join(supported, ", "), want),
			fmt.Sprintf("upgrade the plugin, or set %s to a version it supports", field))
	}
	return ok(name, fmt.Sprintf("%s supports cniVersion %s", p, want))
}

// printDoctor prints the catenactl that checked, then a table of the checks.
func printDoctor(a *app, out doctorOutput) error {
	if _, err := fmt.Fprintf(a.stdout, "catenactl %s\n", out.Catenactl); err != nil {
		return fmt.Errorf("writing doctor's header: %w", err)
	}
	t := newTable(a.stdout, "CHECK", "STATUS", "DETAIL")
	for _, c := range out.Checks {
		t.row(c.Check, c.Status, c.Detail)
		for _, it := range c.Items {
			t.row("", "", "- "+it)
		}
		if c.Hint != "" {
			t.row("", "", "hint: "+c.Hint)
		}
	}
	return t.flush()
}
