package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/afero"
	"github.com/spf13/cobra"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/cmd/internal/cli"
	"github.com/catena-cni/catena/fileutil"
	"github.com/catena-cni/catena/libchain"
	"github.com/catena-cni/catena/libchain/events"
	"github.com/catena-cni/catena/libchain/invoke"
	"github.com/catena-cni/catena/node/reconcile"
)

const (
	defaultNetDir  = "/etc/cni/net.d"
	defaultCNIPath = "/opt/cni/bin"
)

// env is what catenactl takes from its process, so that tests can run it in
// process against their own directories.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	now            func() time.Time
	// netDir is where the config is looked for when --conf is not given.
	netDir string
	// ownerUID is who must own the cache dir (root in production).
	ownerUID int
	// runtimeSockets are the CRI sockets --runtime-endpoint auto tries, in
	// order (nil: reconcile.DefaultEndpoints, containerd's then CRI-O's).
	runtimeSockets []string
	// kubelet finds the node's kubelet for --runtime-endpoint auto (nil:
	// not looked for; main: reconcile.FindKubelet).
	kubelet func() (reconcile.Kubelet, error)
}

// app is one invocation: the environment plus the global flags.
type app struct {
	env
	confPath string
	cacheDir string
	cniPath  string
	json     bool
}

// run executes catenactl with args and returns the exit code: 0 on success,
// 1 on failure, 2 on a usage error.
func run(args []string, e env) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return cli.Execute(ctx, newRootCmd(e), args, e.stderr)
}

func newRootCmd(e env) *cobra.Command {
	a := &app{env: e}
	root := &cobra.Command{
		Use:   "catenactl",
		Short: "Inspect and heal the attachments of the Catena CNI meta-plugin",
		Long: `catenactl inspects and heals what the Catena CNI meta-plugin records on this
node: one record per attachment (network, container ID, ifname) under the
cache dir, saying what each delegate of the chain really did.

The config is read from --conf, or else from the first file in ` + defaultNetDir + `
(in lexical order, as runtimes do) that has a catena entry; the cache dir is the
config's cacheDir unless --cache-dir overrides it. list, show, stats, trace
and metrics need only the cache dir; gc and repair call the delegates, found in
--cni-path, with the configs cached in each record.

Output is a table for humans, or JSON with --json. Errors go to stderr. The
exit code is 0 on success, 1 on a failure or a problem found, 2 on a usage
error.`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &cli.UsageError{Err: err} })
	cli.SetVersion(root)
	pf := root.PersistentFlags()
	pf.StringVar(&a.confPath, "conf", "", "network config (.conflist or .conf) with the catena entry (default: the first such file in "+defaultNetDir+")")
	pf.StringVar(&a.cacheDir, "cache-dir", "", "Catena's cache dir (default: the config's cacheDir)")
	pf.StringVar(&a.cniPath, "cni-path", "", "where delegate plugins are found, a list like CNI_PATH (default: $CNI_PATH, else "+defaultCNIPath+")")
	pf.BoolVar(&a.json, "json", false, "print JSON instead of a table")
	root.AddCommand(a.listCmd(), a.showCmd(), a.gcCmd(), a.repairCmd(), a.doctorCmd(), a.statsCmd(), a.traceCmd(), a.metricsCmd(), a.reconcileCmd(), a.leaksCmd())
	return root
}

// exactArgs is cobra.ExactArgs reporting a usage error.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return &cli.UsageError{Err: err}
		}
		return nil
	}
}

// loadConf returns Catena's config from --conf or the first config file of
// netDir with a catena entry, with --cache-dir applied, and the file it came
// from.
func (a *app) loadConf() (*libchain.NetConf, string, error) {
	path := a.confPath
	if path == "" {
		var err error
		if path, err = findConfFile(a.netDir); err != nil {
			return nil, "", err
		}
	}
	conf, err := libchain.LoadConfFile(path)
	if err != nil {
		return nil, path, fmt.Errorf("loading catena config: %w", err)
	}
	if a.cacheDir != "" {
		conf.CacheDir = filepath.Clean(a.cacheDir)
	}
	return conf, path, nil
}

// resolveCacheDir returns --cache-dir, or else the config's cacheDir.
func (a *app) resolveCacheDir() (string, error) {
	if a.cacheDir != "" {
		return filepath.Clean(a.cacheDir), nil
	}
	conf, _, err := a.loadConf()
	if err != nil {
		return "", fmt.Errorf("%w (or pass --cache-dir)", err)
	}
	return conf.CacheDir, nil
}

// resolveCNIPath returns --cni-path, $CNI_PATH or the default.
func (a *app) resolveCNIPath() string {
	if a.cniPath != "" {
		return a.cniPath
	}
	if p := a.getenv("CNI_PATH"); p != "" {
		return p
	}
	return defaultCNIPath
}

// store opens the record store of cacheDir as the catena plugin does.
func store(cacheDir string) *cache.DiskStore {
	return storeOn(afero.NewOsFs(), cacheDir)
}

// storeOn opens the record store of cacheDir on fsys.
func storeOn(fsys afero.Fs, cacheDir string) *cache.DiskStore {
	return cache.NewDiskStore(fsys, cacheDir, cache.NewFlockLocker(filepath.Join(cacheDir, cache.LocksDir)))
}

// engine wires an engine like the catena plugin's, for gc and repair: its
// operations are logged per the config and appended to the event journal.
// The returned func closes the log.
func (a *app) engine() (*libchain.Engine, libchain.Request, func() error, error) {
	conf, _, err := a.loadConf()
	if err != nil {
		return nil, libchain.Request{}, nil, err
	}
	log, closeLog, err := libchain.NewLogger(conf, a.stderr)
	if err != nil {
		return nil, libchain.Request{}, nil, fmt.Errorf("opening the log of network %q: %w", conf.Name, err)
	}
	exec := invoke.NewExec(a.stderr)
	fsys := fileutil.TrustedFs(afero.NewOsFs(), conf.CacheDir)
	eng := &libchain.Engine{
		Store:    storeOn(fsys, conf.CacheDir),
		Exec:     exec,
		Versions: libchain.NewCachedProber(exec, fsys, conf.CacheDir, log),
		Log:      log,
		OnOp:     events.OnOp(fsys, conf.CacheDir, log),
		Procs:    libchain.ProcScanner{},
	}
	req := libchain.Request{Conf: conf, Args: libchain.RuntimeArgs{Path: a.resolveCNIPath()}}
	return eng, req, closeLog, nil
}
