package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/afero"
	"github.com/spf13/cobra"

	"github.com/catena-cni/catena/cmd/internal/cli"
	"github.com/catena-cni/catena/fileutil"
	"github.com/catena-cni/catena/libchain/events"
	"github.com/catena-cni/catena/libchain/invoke"
	"github.com/catena-cni/catena/node/leaks"
	"github.com/catena-cni/catena/node/reconcile"
)

// Where the leak report looks by default.
const (
	defaultResultsDir = "/var/lib/cni/results"
)

// leakFlags are the flags of leaks, which repair --from-report shares.
type leakFlags struct {
	endpoint, confDir, resultsDir string
	minAge                        time.Duration
}

func (l *leakFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&l.endpoint, "runtime-endpoint", autoEndpoint, "the CRI runtime's socket, as reconcile's")
	f.StringVar(&l.confDir, "cni-conf-dir", defaultNetDir, "the runtime's CNI conf dir: the networks whose host-local reservations and portmap chains are looked at")
	f.StringVar(&l.resultsDir, "results-dir", defaultResultsDir, "the runtime's libcni result cache")
	f.DurationVar(&l.minAge, "min-age", leaks.DefaultMinAge, "a finding younger than this is kept")
}

// scanner is the leak scanner of this node, and the close of its runtime
// connection.
func (a *app) scanner(ctx context.Context, l *leakFlags) (*leaks.Scanner, func(), error) {
	if l.minAge < 0 {
		return nil, nil, cli.Usagef("--min-age %s: must not be negative", l.minAge)
	}
	cacheDir, err := a.resolveCacheDir()
	if err != nil {
		return nil, nil, err
	}
	endpoint, err := a.resolveEndpoint(ctx, l.endpoint)
	if err != nil {
		return nil, nil, err
	}
	lister, err := reconcile.DialCRI(endpoint)
	if err != nil {
		return nil, nil, cli.Usagef("%w", err)
	}
	on := a.onNode(l, cacheDir, endpoint, boundedLister{lister, reconcile.DefaultRuntimeTimeout})
	s, err := on.Scanner()
	if err != nil {
		_ = lister.Close()
		return nil, nil, err
	}
	return s, func() { _ = lister.Close() }, nil
}

// onNode is this node as catenactl's leaks and repair see it.
func (a *app) onNode(l *leakFlags, cacheDir, endpoint string, lister reconcile.SandboxLister) leaks.OnNode {
	return leaks.OnNode{ConfDir: l.confDir, ResultsDir: l.resultsDir, CacheDir: cacheDir, Sandboxes: lister, Runtime: endpoint,
		MinAge: l.minAge, Now: a.now, CNIPath: a.resolveCNIPath(), Exec: invoke.NewExec(a.stderr),
		OnOp: events.OnOp(afero.NewOsFs(), cacheDir, slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))}
}

// boundedLister bounds each ListPodSandbox.
type boundedLister struct {
	reconcile.SandboxLister
	timeout time.Duration
}

func (b boundedLister) SandboxIDs(ctx context.Context) (map[string]struct{}, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return b.SandboxLister.SandboxIDs(ctx)
}

func (a *app) leaksCmd() *cobra.Command {
	var l leakFlags
	var output string
	cmd := &cobra.Command{
		Use:   "leaks",
		Short: "Report what the node's networks hold that no live sandbox owns",
		Long: `leaks looks at everything the networks of the conf dir hold on this node (each
host-local reservation, each portmap DNAT chain, flannel's scratch files, the
veths on their bridges whose peer's namespace nothing visible holds, the
runtime's libcni cache entries and Catena's records), finds each one's owner
(container ID, ifname, network) and checks it against the runtime's sandboxes
(CRI ListPodSandbox), the addresses of every live network namespace, Catena's
records and locks. A finding is a leak only when all of these agree: no
sandbox of its owner in a non-empty list, no record, no lock held, its
address in no live namespace, a delegate of the network's config that made
it (of the config the owner's libcni cache entry holds, when it has one),
and older than --min-age. Every doubt keeps it, with the reason; a veth, a
cache entry and a record are only reported.

It changes nothing. --output FILE writes the report as JSON (versioned, with
the node, the boot ID, the time and every input read) to FILE, a private
file replaced atomically: two such reports, taken --confirm-after apart,
are what repair --from-report releases from. --json prints the same JSON.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, closeLister, err := a.scanner(cmd.Context(), &l)
			if err != nil {
				return err
			}
			defer closeLister()
			rep, err := s.Scan(cmd.Context())
			if err != nil {
				return err
			}
			if output != "" {
				b, err := json.MarshalIndent(rep, "", "  ")
				if err != nil {
					return fmt.Errorf("report: %w", err)
				}
				if err := fileutil.WriteFileAtomic(afero.NewOsFs(), output, append(b, '\n'), 0o600); err != nil {
					return fmt.Errorf("--output: %w", err)
				}
			}
			if a.json {
				return writeJSON(a.stdout, rep)
			}
			return printLeaks(a.stdout, rep)
		},
	}
	l.register(cmd)
	cmd.Flags().StringVar(&output, "output", "", "also write the report as JSON to this file (0600, replaced atomically)")
	return cmd
}

func printLeaks(w io.Writer, rep *leaks.Report) error {
	t := newTable(w, "VERDICT", "KIND", "NETWORK", "CONTAINER", "IFNAME", "ITEM", "AGE", "WHY")
	for _, f := range rep.Findings {
		age := "-"
		if !f.Since.IsZero() {
			age = rep.Time.Sub(f.Since).Round(time.Second).String()
		}
		t.row(f.Verdict, f.Kind, f.Owner.Network, f.Owner.ContainerID, f.Owner.IfName, f.Item, age, f.Why)
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, in := range rep.Inputs {
		if in.Error != "" {
			if _, err := fmt.Fprintf(w, "input %s (%s): %s\n", cli.Printable(in.What), cli.Printable(in.Where), cli.Printable(in.Error)); err != nil {
				return err
			}
		}
	}
	var parts []string
	counts := rep.Counts()
	for _, k := range leaks.Kinds {
		if c := counts[k]; c != nil {
			parts = append(parts, fmt.Sprintf("%s %d leaked, %d kept", k, c[leaks.Leak], c[leaks.Keep]))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "nothing held")
	}
	_, err := fmt.Fprintf(w, "leaks on %s at %s: %s\n", cli.Printable(rep.Node), rep.Time.Format(time.RFC3339), strings.Join(parts, "; "))
	return err
}

// releaseOutput is what repair --from-report prints.
type releaseOutput struct {
	Reports  []string         `json:"reports"`
	Released []leaks.Released `json:"released"`
	Refused  []leaks.Refusal  `json:"refused"`
	DryRun   bool             `json:"dryRun,omitempty"`
	Now      *leaks.Report    `json:"-"`
}

// repairFromReports releases what every report and a fresh scan agree on.
func (a *app) repairFromReports(ctx context.Context, l *leakFlags, paths []string, confirmAfter time.Duration, dryRun bool) error {
	if confirmAfter < 0 {
		return cli.Usagef("--confirm-after %s: must not be negative", confirmAfter)
	}
	var reports []*leaks.Report
	for _, p := range paths {
		r, err := leaks.ReadReport(afero.NewOsFs(), p)
		if err != nil {
			return err
		}
		reports = append(reports, r)
	}
	s, closeLister, err := a.scanner(ctx, l)
	if err != nil {
		return err
	}
	defer closeLister()
	now, err := s.Scan(ctx)
	if err != nil {
		return err
	}
	release, refused, err := leaks.Confirm(reports, now, confirmAfter)
	if err != nil {
		return fmt.Errorf("repair --from-report: %w", err)
	}
	rel := a.onNode(l, s.CacheDir, s.Runtime, s.Sandboxes).Releaser(dryRun)
	out := releaseOutput{Reports: paths, Released: rel.Release(ctx, release), Refused: refused, DryRun: dryRun}
	if out.Refused == nil {
		out.Refused = []leaks.Refusal{}
	}
	if a.json {
		err = writeJSON(a.stdout, out)
	} else {
		err = printRelease(a.stdout, out)
	}
	if err != nil {
		return err
	}
	failed := 0
	for _, r := range out.Released {
		if r.Error != "" {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("repair --from-report: %d release(s) failed; their findings are still held", failed)
	}
	return nil
}

func printRelease(w io.Writer, out releaseOutput) error {
	t := newTable(w, "RESULT", "NETWORK", "CONTAINER", "IFNAME", "DELEGATE", "ITEMS", "WHY")
	done := 0
	for _, r := range out.Released {
		res, why := "released", ""
		switch {
		case r.Error != "":
			res, why = "failed", r.Error
		case r.DryRun:
			res = "would release"
		default:
			done++
		}
		t.row(res, r.Owner.Network, r.Owner.ContainerID, r.Owner.IfName, fmt.Sprintf("%d (%s)", r.Delegate.Index, r.Delegate.Type), strings.Join(r.Items, ","), why)
	}
	for _, r := range out.Refused {
		f := r.Finding
		t.row("kept", f.Owner.Network, f.Owner.ContainerID, f.Owner.IfName, "-", f.Item, r.Why)
	}
	if err := t.flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "repair --from-report: %d released, %d failed or would be, %d kept, from %d reports\n",
		done, len(out.Released)-done, len(out.Refused), len(out.Reports))
	return err
}
