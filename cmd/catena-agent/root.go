package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/afero"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/catena-cni/catena/cmd/internal/cli"
	"github.com/catena-cni/catena/libchain"
	"github.com/catena-cni/catena/node/adopt"
	"github.com/catena-cni/catena/node/nodeconf"
	"github.com/catena-cni/catena/node/reconcile"
)

// Defaults of the node's paths.
const (
	defaultConfDir    = "/etc/cni/net.d"
	defaultBinDir     = "/opt/cni/bin"
	defaultConfName   = "00-catena.conflist"
	defaultResultsDir = "/var/lib/cni/results"
	defaultListenAddr = "127.0.0.1:9617"
	defaultResync     = 30 * time.Second
)

// env is what catena-agent takes from its process, so tests can run it in
// process against their own directories.
type env struct {
	stdout, stderr io.Writer
	fs             afero.Fs
	getenv         func(string) string
	// selfDir is the directory of the catena-agent executable: the default
	// source of the binaries it installs.
	selfDir string
	// runtimeSockets are the CRI sockets --runtime-endpoint auto tries, in
	// order (nil: reconcile.DefaultEndpoints, containerd's then CRI-O's).
	runtimeSockets []string
	// kubelet finds the node's kubelet for --runtime-endpoint auto (nil:
	// not looked for; main: reconcile.FindKubelet).
	kubelet func() (reconcile.Kubelet, error)
	// nodeRuntime is the Node's containerRuntimeVersion, through the API
	// server at cfg (nil: not asked; main: nodeRuntimeVersion).
	nodeRuntime func(ctx context.Context, cfg *rest.Config, node string) (string, error)
}

// autoSources are where --runtime-endpoint auto learns which runtime
// kubelet uses: kubelet's process, and the Node named node through cfg
// (nil: not in a cluster).
func (e env) autoSources(cfg *rest.Config, node string) reconcile.AutoSources {
	src := reconcile.AutoSources{Kubelet: e.kubelet}
	if e.nodeRuntime != nil {
		src.NodeRuntime = func(ctx context.Context) (string, error) { return e.nodeRuntime(ctx, cfg, node) }
	}
	return src
}

// sockets are the CRI sockets --runtime-endpoint auto tries.
func (e env) sockets() []string {
	if e.runtimeSockets == nil {
		return reconcile.DefaultEndpoints()
	}
	return e.runtimeSockets
}

// run executes catena-agent with args and returns the exit code: 0 on
// success, 1 on failure, 2 on a usage error.
func run(args []string, e env) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runContext(ctx, args, e)
}

func runContext(ctx context.Context, args []string, e env) int {
	return cli.Execute(ctx, newRootCmd(e), args, e.stderr)
}

func newRootCmd(e env) *cobra.Command {
	root := &cobra.Command{
		Use:   "catena-agent",
		Short: "Install Catena in front of a node's primary CNI and keep it installed",
		Long: `catena-agent puts the Catena CNI meta-plugin in front of the node's primary CNI.

It reads the primary's network config (the file the runtime would load: the
lexically first .conf, .conflist or .json in the conf dir, or --primary-conf),
and writes --conf-name (default ` + defaultConfName + `, which sorts first) in
the same dir: the primary's name, cniVersion, disableCheck and disableGC, and one
plugin, catena, whose delegates are the primary's plugins verbatim. With
--delegate-versions auto (the default) each delegate's cniVersion is "auto" and
the file's cniVersions adds 1.1.0 to the primary's versions: Catena speaks 1.1.0
to the runtime and calls each plugin at what its binary supports. The file
carries a generated key ("catena.dev/generated") naming the primary and its sha256.
It copies catena and catenactl into the CNI bin dir, and, before each write of
the generated file and on every pass after it, adopts the attachments the
primary made that Catena has no record of (from the runtime's libcni cache,
--results-dir), so their DEL still tears them down. The generated file names
that dir (libcniResultsDir), so that a DEL through Catena that finds no record
(a pod ADDed through the primary after the last pass) adopts and tears down
the primary's entry of that attachment itself.

Writes are atomic (temp file in the same dir, fsync, rename, fsync of the dir)
and happen only when content changes. The generated file's mode is the
primary's masked to at most 0644; a narrower mode set by hand is kept.
Temp files a killed agent left (.catena.<hex>.tmp, ...) are removed once 2
minutes old. install and run hold the conf dir's interlock
(.catena-agent.lock) while they may write; see uninstall. A primary that is invalid, half-written,
missing or already Catena's, or that names a plugin binary found in none of
the --cni-path dirs, is never wrapped: the last good generated file stays, and
the reason is logged (under run, /readyz fails with it). No subcommand ever
removes the generated file except uninstall.

Every flag can also be set by the environment, e.g. --lock-timeout by
CATENA_AGENT_LOCK_TIMEOUT (the DaemonSet's ConfigMap does this); a flag on the
command line wins.

Exit codes: 0 success, 1 failure (the message says why), 2 usage error.`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &cli.UsageError{Err: err} })
	cli.SetVersion(root)
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error { return flagsFromEnv(cmd.Flags(), e.getenv) }
	root.AddCommand(installCmd(e), uninstallCmd(e), runCmd(e))
	return root
}

// installFlags are the flags of install and run.
type installFlags struct {
	cfg        nodeconf.Config
	resultsDir string
	resync     time.Duration
	logLevel   string
	networkDir string
	cniPath    string
	// delegateVersions is --delegate-versions (nodeconf.DelegateVersionsMode).
	delegateVersions string
	// onAdopt, if set, receives each adoption's report (run's metrics).
	onAdopt func(adopt.Report)
}

func (f *installFlags) register(cmd *cobra.Command, e env) {
	fl := cmd.Flags()
	fl.StringVar(&f.cfg.ConfDir, "cni-conf-dir", defaultConfDir, "the runtime's CNI conf dir")
	fl.StringVar(&f.cfg.BinDir, "cni-bin-dir", defaultBinDir, "the CNI bin dir catena and catenactl are copied into (\"\": copy nothing)")
	fl.StringVar(&f.cniPath, "cni-path", "", "the runtime's CNI bin dirs, colon-separated as CNI_PATH (containerd's bin_dirs, CRI-O's plugin_dirs): a primary naming a plugin binary in none of them is not wrapped, and run's reconciler finds the delegates there (default: --cni-bin-dir; both empty: nothing checked)")
	fl.StringVar(&f.cfg.SourceDir, "source-dir", e.selfDir, "where the catena and catenactl binaries to install are (default: catena-agent's own dir)")
	fl.StringVar(&f.cfg.Primary, "primary-conf", "auto", "the primary's file name in the conf dir; auto: what the runtime would load, chosen once and then kept")
	fl.StringVar(&f.cfg.ConfName, "conf-name", defaultConfName, "the generated conflist's name; it must sort before every other config file")
	fl.StringVar(&f.resultsDir, "results-dir", defaultResultsDir, "the runtime's libcni cache dir (absolute), whose attachments of the primary's network are adopted, on every pass and by a DEL that finds no record (\"\": adopt nothing)")
	fl.StringVar(&f.networkDir, "network-dir-plugins", string(nodeconf.NetworkDirLoad), "whether the runtime runs the plugins of the primary's network dir, <conf dir>/<network name>/*.conf, after a .conflist's own (then Catena wraps them too): load (libcni v1.3: containerd 2.1 and later, CRI-O 1.33 and later) or ignore (older runtimes)")
	fl.DurationVar(&f.resync, "resync", defaultResync, "without --once: re-check everything this often, besides watching the conf dir")
	fl.DurationVar(&f.cfg.RewriteBackoff, "rewrite-backoff", nodeconf.DefaultRewriteBackoff, "the longest wait before rewriting the generated conflist while another writer keeps taking it away (Cilium's exclusive mode); at least 1s")
	fl.StringVar(&f.logLevel, "log-level", "info", "catena-agent's own log level on stderr: debug, info, warn, error")
	c := &f.cfg.Catena
	fl.StringVar(&c.CacheDir, "cache-dir", libchain.DefaultCacheDir, "Catena's cacheDir (records, locks)")
	fl.DurationVar(&c.LockTimeout, "lock-timeout", 0, "Catena's lockTimeout (0: Catena's default, "+libchain.DefaultLockTimeout.String()+")")
	fl.DurationVar(&c.DelegateTimeout, "delegate-timeout", 0, "Catena's delegateTimeout (0: Catena's default, "+libchain.DefaultDelegateTimeout.String()+")")
	fl.DurationVar(&c.SlowThreshold, "slow-threshold", 0, "Catena's slowThreshold (0: Catena's default)")
	fl.DurationVar(&c.GCGracePeriod, "gc-grace-period", 0, "Catena's gcGracePeriod (0: Catena's default, "+libchain.DefaultGCGracePeriod.String()+")")
	fl.StringVar(&c.LogFile, "catena-log-file", "", "Catena's logFile (\"\": stderr of the runtime)")
	fl.StringVar(&c.LogLevel, "catena-log-level", "", "Catena's logLevel (\"\": Catena's default)")
	fl.StringVar(&f.delegateVersions, "delegate-versions", string(nodeconf.DelegateVersionsAuto),
		"auto: each delegate's cniVersion is \"auto\" (Catena asks each binary's VERSION once and calls it at the highest version both support) and the generated file offers the runtime CNI 1.1.0 in cniVersions besides the primary's versions, so that a runtime with libcni 1.2 or later sends Catena STATUS and GC; primary: the primary's versions as written, every delegate called at the one the runtime picks")
}

// logger returns the agent's own logger, on stderr.
func (f *installFlags) logger(w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(f.logLevel)); err != nil {
		return nil, &cli.UsageError{Err: fmt.Errorf("--log-level %q: %w", f.logLevel, err)}
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl})), nil
}

// installer builds the Installer the flags describe.
func (f *installFlags) installer(e env, cmdName string) (*nodeconf.Installer, error) {
	f.cfg.NetworkDir = nodeconf.NetworkDirMode(f.networkDir)
	f.cfg.Catena.DelegateVersions = nodeconf.DelegateVersionsMode(f.delegateVersions)
	if err := f.cfg.Validate(); err != nil {
		return nil, &cli.UsageError{Err: err}
	}
	if f.resync <= 0 {
		return nil, &cli.UsageError{Err: fmt.Errorf("--resync %s: must be positive", f.resync)}
	}
	if f.resultsDir != "" && !filepath.IsAbs(f.resultsDir) {
		return nil, &cli.UsageError{Err: fmt.Errorf("--results-dir %q: must be an absolute path", f.resultsDir)}
	}
	f.cfg.Catena.LibcniResultsDir = f.resultsDir
	f.cfg.PluginDirs = pluginDirs(f.cniPath, f.cfg.BinDir)
	log, err := f.logger(e.stderr)
	if err != nil {
		return nil, err
	}
	i := &nodeconf.Installer{Fs: e.fs, Cfg: f.cfg, Log: log, Interlock: nodeconf.NewDirLock(f.cfg.ConfDir, holder(cmdName))}
	if f.resultsDir != "" {
		i.Adopt = adopter(f.resultsDir, f.cfg.Catena.CacheDir, log, f.onAdopt)
	}
	return i, nil
}

// pluginDirs are the dirs of --cni-path, or else the --cni-bin-dir.
func pluginDirs(cniPath, binDir string) []string {
	var dirs []string
	for _, d := range filepath.SplitList(cniPath) {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 && binDir != "" {
		dirs = []string{binDir}
	}
	return dirs
}

// envPrefix prefixes the environment variable of each flag.
const envPrefix = "CATENA_AGENT_"

// flagsFromEnv sets each flag not given on the command line from its
// environment variable, if set: --lock-timeout from CATENA_AGENT_LOCK_TIMEOUT.
func flagsFromEnv(fl *pflag.FlagSet, getenv func(string) string) error {
	if getenv == nil {
		return nil
	}
	var err error
	fl.VisitAll(func(f *pflag.Flag) {
		name := envName(f.Name)
		v := getenv(name)
		if f.Changed || v == "" || err != nil {
			return
		}
		if serr := fl.Set(f.Name, v); serr != nil {
			err = &cli.UsageError{Err: fmt.Errorf("%s=%q: %w", name, v, serr)}
		}
	})
	return err
}

// envName is the environment variable of a flag.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// holder describes this process in the conf dir's interlock.
func holder(cmd string) string {
	return fmt.Sprintf("catena-agent %s (pid %d)", cmd, os.Getpid())
}
