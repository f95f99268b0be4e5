package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/catena-cni/catena/node/agent"
	"github.com/catena-cni/catena/node/nodeconf"
)

func runCmd(e env) *cobra.Command {
	var f installFlags
	var rf reconcileFlags
	var ef eventsFlags
	var sf secureFlags
	var addr string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "The DaemonSet's process: install, keep installed, reconcile, serve /healthz, /readyz and /metrics",
		Long: `run does what install does and keeps doing it (fsnotify on the conf dir and a
periodic --resync), and serves on --listen-addr:

  /healthz  200 while the install loop is alive (a pass within 3 x --resync)
  /readyz   200 while the last pass succeeded and the generated conflist is
            in place now (read at each probe: present, with the content
            and mode the agent would write from the primary as it is now,
            sorting first); 503 with the reason otherwise
  /metrics  Prometheus metrics: operations (from the event journal), records
            by network and phase, held attachments, reconcile passes,
            writes of the generated conflist and who undid them, the
            readiness above and whether the cache and journal dirs are
            writable

Every --reconcile-interval it runs a pass of the node reconciler (as
catenactl reconcile does): attachments whose sandbox the CRI runtime at
--runtime-endpoint no longer lists are marked, then reclaimed on a pass at
least --grace later if still unlisted, unlocked and unchanged; records that
need teardown are retried with per-record backoff whatever the runtime says.

It holds the conf dir's interlock (.catena-agent.lock, flock) while it runs:
uninstall waits for it, and it writes nothing while another agent or
uninstall holds it. A generated file that someone else renames away,
removes or changes after the agent wrote it (Cilium with cni.exclusive:
true, its default, renames it to <name>.cilium_bak) is noticed at its
fsnotify event: one warning names the cause and the fix (cni.exclusive:
false, in Cilium's chaining mode too), /readyz fails with it,
catena_conflist_undone_total{by="cilium"|"other"} counts it, and the file
is rewritten after 1 s the first time (Cilium's: after a minute), then at
most once a minute while it goes on (catena_conflist_backoff_seconds).
A conf dir that is a mount whose host dir was deleted or renamed (a
hostPath bind mount keeps the old inode) makes it exit 1, so that kubelet
restarts it with a fresh mount.
In a cluster (--events, on by default) it records Kubernetes Events through
client-go's event broadcaster: CatenaRolledBack, CatenaTeardownHeld,
CatenaTeardownReleased and CatenaReclaimed on the pod of each new operation
of the event journal (read every --events-interval, from its end at start),
and CatenaConflistWritten, CatenaConflistTaken and, at
--events-held-threshold held teardowns, CatenaTeardownsHeld on the Node
(--node-name). Events the API server does not take are dropped after
client-go's bounded retries (catena_events_dropped_total); nothing else
waits for it. Outside a cluster it logs that it sends none.
In a cluster it also serves /metrics over HTTPS on --node-ip:
--secure-metrics-port (0: not), to clients that the API server
authenticates (TokenReview; no token: 401) and allows get on the
non-resource URL /metrics (SubjectAccessReview; else 403), as kubelet does;
the certificate is tls.crt and tls.key of --secure-metrics-cert-dir (a
mounted kubernetes.io/tls Secret), else self-signed at start. A request
whose token is not known good is rate limited per source address; for a
connection from --secure-metrics-trusted-proxies, the source is the last
X-Forwarded-For hop not among them.
On SIGTERM it exits leaving every file in place.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mux := http.NewServeMux()
			log, err := f.logger(e.stderr)
			if err != nil {
				return err
			}
			kcfg := inCluster(log)
			obs, err := rf.setup(cmd.Context(), mux, f.cfg.Catena.CacheDir, strings.Join(pluginDirs(f.cniPath, f.cfg.BinDir), string(filepath.ListSeparator)),
				e.sockets(), e.autoSources(kcfg, ef.node), log, e.stderr)
			if err != nil {
				return err
			}
			if obs.closer != nil {
				defer func() { _ = obs.closer.Close() }()
			}
			f.onAdopt = obs.onAdopt
			inst, err := f.installer(e, "run")
			if err != nil {
				return err
			}
			inst.Observer = obs.metrics
			events := ef.setup(cmd.Context(), kcfg, f.cfg.Catena.CacheDir, obs.metrics, inst, log)
			secure, err := sf.setup(kcfg, obs.handler, log)
			if err != nil {
				return err
			}
			events = append(events, secure...)
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("--listen-addr: %w", err)
			}
			var health agent.Health
			health.Register(mux)
			health.AddReadiness("install", installReady(inst))
			health.AddLiveness("install", installAlive(inst, f.resync))
			if err := obs.metrics.ReadinessGauge(installReady(inst)); err != nil {
				return err
			}
			return agent.RunAll(cmd.Context(), append(append(obs.components(), events...),
				agent.Named{Name: "install", Runnable: agent.RunnableFunc(func(ctx context.Context) error { return inst.Watch(ctx, f.resync) })},
				agent.Named{Name: "http", Runnable: &agent.Server{Listener: ln, Handler: mux, Log: inst.Log}},
			)...)
		},
	}
	f.register(cmd, e)
	rf.register(cmd)
	ef.register(cmd)
	sf.register(cmd)
	cmd.Flags().StringVar(&addr, "listen-addr", defaultListenAddr, "address of /healthz, /readyz and /metrics")
	return cmd
}

// installReady is ready while the last pass succeeded and the generated
// file is in place now, as the agent would write it (Installer.Current).
func installReady(inst *nodeconf.Installer) agent.Check {
	return inst.Current
}

// installAlive fails when no pass has ended for 3 resync periods after the
// first: the loop is stuck.
func installAlive(inst *nodeconf.Installer, resync time.Duration) agent.Check {
	start := time.Now()
	return func() error {
		last := inst.Status().At
		if last.IsZero() {
			last = start
		}
		if age := time.Since(last); age > 3*resync {
			return fmt.Errorf("no install pass for %s", age.Round(time.Second))
		}
		return nil
	}
}
