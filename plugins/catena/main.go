package main

import (
	"context"
	"os"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/spf13/afero"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/fileutil"
	"github.com/catena-cni/catena/libchain"
	"github.com/catena-cni/catena/libchain/events"
	"github.com/catena-cni/catena/libchain/invoke"
	"github.com/catena-cni/catena/libchain/libcnientry"
	"github.com/catena-cni/catena/libchain/release"
	"github.com/catena-cni/catena/libchain/tracectx"
)

// about is what catena prints on stderr when run with no CNI_COMMAND (by
// hand, at a shell): its version and commit, and what it is. CNI's VERSION
// command answers with the spec versions only, as the spec defines.
func about() string {
	return "catena " + release.String() + ": a chained CNI meta-plugin with a durable per-step record"
}

func main() {
	tuneRuntime()
	if len(os.Args) == 2 && os.Args[1] == libchain.RetrierArg {
		os.Exit(retrier())
	}
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add: func(a *skel.CmdArgs) error {
			return run(a, func(e *libchain.Engine, ctx context.Context, r libchain.Request) error {
				res, err := e.Add(ctx, r)
				if err != nil {
					return err
				}
				if err := types.PrintResult(res, r.Conf.CNIVersion); err != nil {
					return err
				}
				e.KickRetry(r)
				return nil
			})
		},
		Del: func(a *skel.CmdArgs) error {
			return run(a, func(e *libchain.Engine, ctx context.Context, r libchain.Request) error {
				err := e.Del(ctx, r)
				e.KickRetry(r)
				return err
			})
		},
		Check:  func(a *skel.CmdArgs) error { return run(a, (*libchain.Engine).Check) },
		Status: func(a *skel.CmdArgs) error { return run(a, (*libchain.Engine).Status) },
		GC:     func(a *skel.CmdArgs) error { return run(a, (*libchain.Engine).GC) },
	}, version.All, about())
}

// run parses the config, wires the engine to the on-disk store and the real
// executor, and calls one verb, which continues the trace context the
// runtime passed in the environment (libcni's TRACEPARENT, TRACESTATE and
// BAGGAGE): what of it is malformed is dropped, with one warning on the
// log, and never fails the call.
func run(a *skel.CmdArgs, verb func(*libchain.Engine, context.Context, libchain.Request) error) error {
	conf, err := libchain.ParseConfig(a.StdinData)
	if err != nil {
		return err
	}
	eng, closeLog, err := newEngine(conf)
	if err != nil {
		return err
	}
	defer closeLog()
	eng.Retrier = &libchain.ProcKicker{CacheDir: conf.CacheDir, Config: a.StdinData}
	// This process makes one operation: what it cost goes with it.
	appendOp := eng.OnOp
	eng.OnOp = func(op libchain.Op) {
		if p, err := events.SelfProcess(op.Start); err == nil {
			op.Process = p
		} else {
			eng.Log.Debug("event journal: process", "error", err)
		}
		appendOp(op)
	}
	req := libchain.Request{Conf: conf, Args: libchain.RuntimeArgs{
		ContainerID: a.ContainerID, NetNS: a.Netns, IfName: a.IfName, Args: a.Args, Path: a.Path,
	}}
	tc, err := tracectx.FromEnv(os.LookupEnv)
	if err != nil {
		eng.Log.Warn("trace context of the environment dropped", "error", err)
	}
	return verb(eng, libchain.WithTrace(context.Background(), tc), req)
}

// newEngine wires an engine for conf: the on-disk store, the real
// executor, conf's logger, the event journal, the /proc scanner GC asks
// before it tears down a record the runtime does not list and, with
// libcniResultsDir, the adoption of the primary's attachment by a DEL with
// no record.
func newEngine(conf *libchain.NetConf) (*libchain.Engine, func(), error) {
	log, closeLog, err := libchain.NewLogger(conf, os.Stderr)
	if err != nil {
		return nil, nil, err
	}
	exec := invoke.NewExec(os.Stderr)
	// One trusted filesystem of the cache dir for the store, the version
	// cache and the event journal.
	fsys := fileutil.TrustedFs(afero.NewOsFs(), conf.CacheDir)
	eng := &libchain.Engine{
		Store:    cache.NewDiskStore(fsys, conf.CacheDir, cache.NewFlockLocker(filepath.Join(conf.CacheDir, cache.LocksDir))),
		Exec:     exec,
		Versions: libchain.NewCachedProber(exec, fsys, conf.CacheDir, log),
		Log:      log,
		OnOp:     events.OnOp(fsys, conf.CacheDir, log),
		Procs:    libchain.ProcScanner{},
		// a DEL with no record passes CNI_NETNS only on this proof
		NetNSHolds: libchain.NetNSHolds,
	}
	if conf.LibcniResultsDir != "" {
		atDel, err := libcnientry.NewAtDel(conf.LibcniResultsDir, nil, log)
		if err != nil {
			_ = closeLog()
			return nil, nil, err
		}
		atDel.DirPlugins = conf.LibcniNetworkDirPlugins
		eng.Orphans = atDel
	}
	return eng, func() { _ = closeLog() }, nil
}
