package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/catena-cni/catena/cmd/internal/cli"
	"github.com/catena-cni/catena/node/reconcile"
)

// autoEndpoint asks for the node's runtime: the one of the runtimes'
// default sockets that kubelet uses, as catena-agent finds it
// (reconcile.ChooseEndpoint; catenactl has no Node to ask).
const autoEndpoint = "auto"

func (a *app) reconcileCmd() *cobra.Command {
	var endpoint string
	var opts reconcile.Options
	cmd := &cobra.Command{
		Use:   "reconcile",
		Short: "One pass of the node reconciler: reclaim attachments whose sandbox the runtime forgot",
		Long: `One pass of the node reconciler, as catena-agent run does every
--reconcile-interval. It reads every record of the cache dir, then lists the
runtime's pod sandboxes over CRI (--runtime-endpoint), and:

  - considers only records made by a CRI runtime (CNI_ARGS carry
    K8S_POD_INFRA_CONTAINER_ID equal to the container ID);
  - never touches a record whose sandbox is listed (in any state), whose
    netns shows its sandbox runs (a process is in the namespace of its ADD),
    whose lock is held, or which changed within --grace;
  - when the runtime lists no sandboxes at all, which proves nothing (a wrong
    endpoint, a runtime not yet restored), keeps every record whose netns
    does not prove its sandbox gone;
  - marks every other one durably (phase one), and reclaims a marked record
    (tears it down with its cached config, in reverse order) only on a later
    pass at least --grace after its mark, if a fresh ListPodSandbox still
    lacks it, its lock is free and it is unchanged since the mark;
  - reclaims nothing if the runtime cannot be listed or a record cannot be
    read;
  - retries the teardown of records that need it, whatever the runtime says.

So a first pass only marks: run it again after --grace (or let catena-agent
do it). --dry-run writes no mark and tears nothing down. --json prints every
decision. Exits 1 if the pass met an error.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Grace <= 0 {
				return cli.Usagef("--grace %s: must be positive", opts.Grace)
			}
			if opts.AbandonAfter < 0 {
				return cli.Usagef("--abandon-after %s: must not be negative", opts.AbandonAfter)
			}
			cacheDir, err := a.resolveCacheDir()
			if err != nil {
				return err
			}
			opts.CNIPath = a.resolveCNIPath()
			if endpoint, err = a.resolveEndpoint(cmd.Context(), endpoint); err != nil {
				return err
			}
			r, lister, err := reconcile.NewNode(reconcile.NodeConfig{CacheDir: cacheDir, RuntimeEndpoint: endpoint, Options: opts,
				Log: slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), DelegateStderr: a.stderr})
			if err != nil {
				return cli.Usagef("%w", err)
			}
			defer func() { _ = lister.Close() }()
			r.Now = a.now
			rep, passErr := r.Pass(cmd.Context())
			if a.json {
				if err := writeJSON(a.stdout, rep); err != nil {
					return err
				}
			} else if err := printReconcile(a.stdout, rep); err != nil {
				return err
			}
			return passErr
		},
	}
	f := cmd.Flags()
	f.StringVar(&endpoint, "runtime-endpoint", autoEndpoint, "the CRI runtime's socket; auto: the one of containerd's and CRI-O's default sockets that kubelet uses "+
		"(its --container-runtime-endpoint or config file), else the only one that answers CRI; more than one that could be it is an error, never a guess")
	f.DurationVar(&opts.Grace, "grace", reconcile.DefaultGrace, "a record changed within this is never a candidate, and a mark must be this old before its reclaim")
	f.DurationVar(&opts.AbandonAfter, "abandon-after", 0, "abandon a delegate whose DEL has failed for this long, as repair --abandon does (0: never)")
	f.DurationVar(&opts.RuntimeTimeout, "runtime-timeout", reconcile.DefaultRuntimeTimeout, "bound on each ListPodSandbox")
	f.BoolVar(&opts.DryRun, "dry-run", false, "decide, but write no mark and tear nothing down")
	return cmd
}

func printReconcile(w io.Writer, rep *reconcile.Report) error {
	t := newTable(w, "ACTION", "NETWORK", "CONTAINER", "IFNAME", "REASON")
	for _, d := range rep.Decisions {
		if d.Action == reconcile.ActAlive && d.Reason == "" {
			continue // listed by the runtime
		}
		t.row(string(d.Action), d.Key.Network, d.Key.ContainerID, d.Key.IfName, cli.Printable(d.Reason))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if rep.RuntimeError != "" {
		if _, err := fmt.Fprintf(w, "runtime error: %s\n", cli.Printable(rep.RuntimeError)); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "reconcile: %d records (%d from a CRI runtime), %d sandboxes, %d candidates, %d marked, %d reclaimed, %d kept because of errors, %d retried, %d retries failed, %d held, %s\n",
		rep.Records, rep.InScope, rep.Sandboxes, rep.Candidates, rep.Marked, rep.Reclaimed, rep.Kept, rep.Retried, rep.RetryFailed, rep.Held,
		rep.Duration.Round(time.Millisecond))
	return err
}

// resolveEndpoint is endpoint, or for auto the node's runtime socket.
func (a *app) resolveEndpoint(ctx context.Context, endpoint string) (string, error) {
	if endpoint != autoEndpoint {
		return endpoint, nil
	}
	sockets := a.runtimeSockets
	if sockets == nil {
		sockets = reconcile.DefaultEndpoints()
	}
	c, _, err := reconcile.ResolveAuto(ctx, sockets, reconcile.AutoSources{Kubelet: a.kubelet})
	if err != nil {
		return "", err
	}
	if !c.Found {
		return "", fmt.Errorf("--runtime-endpoint auto: no runtime socket found (%s): name one", strings.Join(c.Passed, "; "))
	}
	return c.Endpoint, nil
}
