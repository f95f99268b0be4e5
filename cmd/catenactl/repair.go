package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/cmd/internal/cli"
	"github.com/catena-cni/catena/libchain"
	"github.com/catena-cni/catena/node/leaks"
)

// abandonment is what `repair --abandon` did before repairing.
type abandonment struct {
	Key   cache.Key `json:"key"`
	Index int       `json:"delegate"`
	At    time.Time `json:"abandonedAt"`
}

// repairOutput is what `repair --json` prints.
type repairOutput struct {
	Network   string       `json:"network"`
	Abandoned *abandonment `json:"abandoned,omitempty"`
	*libchain.RepairReport
}

func (a *app) repairCmd() *cobra.Command {
	var container, ifname string
	var index int
	var l leakFlags
	var fromReports []string
	var confirmAfter time.Duration
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "repair [--abandon CONTAINER --delegate INDEX [--ifname IFNAME]] | --from-report R1 --from-report R2 ...",
		Short: "Retry the teardown of every attachment of the config's network that needs it",
		Long: `Retry, now, the teardown of every record of the config's network that needs it
(a rollback or DEL that failed, or an operation whose process died), in strict
reverse order with the configs cached at ADD, and print a summary. A record
whose lock is held is skipped: an operation is running on it. Exits 1 if any
teardown failed again (the record then keeps the step, its attempts and its
last error), or if the records could not be listed (records/ or the
network's dir is not a directory, a symlink, or unreadable): the error names
the path.

A delegate's DEL can fail forever, for example when its binary was removed
from the node. --abandon CONTAINER --delegate INDEX marks that step of the
container's record abandoned (the record keeps the step, its last DEL error
and when it was abandoned), then retries that record's teardown, which now
continues past the step. Whatever that delegate still holds is left to the
operator. --ifname is needed when the container has several attachments on
the network.

--from-report R1 --from-report R2 ... releases leaks Catena did not make
(see leaks): only the findings that are a leak in every report given (each
written by leaks --output on this node, this boot), the reports at least
--confirm-after apart, and a leak still in a fresh look at the node, with
the same owner and delegate. Each is released under Catena's lock of its
owner's attachment, after checking it is still there as the reports saw it,
by the DEL of the delegate that made it (the network's config as the conf dir
has it, the owner's container ID and ifname, no CNI_NETNS): host-local frees
that owner's reservation, portmap removes that owner's chain. No file,
address or rule is removed otherwise. Every release is journaled (RELEASE).
Exits 1 if a release failed: its findings are still held. --dry-run checks
everything and DELs nothing.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			if len(fromReports) > 0 {
				if container != "" {
					return cli.Usagef("--from-report and --abandon are two repairs: run them one at a time")
				}
				return a.repairFromReports(cmd.Context(), &l, fromReports, confirmAfter, dryRun)
			}
			if f.Changed("confirm-after") || f.Changed("dry-run") || f.Changed("min-age") {
				return cli.Usagef("--confirm-after, --dry-run and --min-age go with --from-report")
			}
			if container == "" && (f.Changed("delegate") || f.Changed("ifname")) {
				return cli.Usagef("--delegate and --ifname go with --abandon")
			}
			if container != "" && !f.Changed("delegate") {
				return cli.Usagef("--abandon needs --delegate INDEX (see `catenactl show %s`)", container)
			}
			eng, req, closeLog, err := a.engine()
			if err != nil {
				return err
			}
			defer func() { _ = closeLog() }()
			if err := checkRecordsDir(req.Conf.CacheDir, req.Conf.Name); err != nil {
				return err
			}
			out := repairOutput{Network: req.Conf.Name}
			var keys []cache.Key
			if container != "" {
				ab, err := a.abandon(cmd.Context(), eng, req.Conf, container, ifname, index)
				if err != nil {
					return err
				}
				out.Abandoned, keys = ab, []cache.Key{ab.Key}
			}
			rep, repairErr := eng.Repair(cmd.Context(), req, keys)
			if rep == nil || (repairErr != nil && len(rep.Failed) == 0) {
				// Repair did not get to the records (it could not list
				// them): there is no report to print.
				return repairErr
			}
			sortReport([][]cache.Key{rep.Repaired}, rep.Skipped, rep.Failed)
			out.RepairReport = rep
			if a.json {
				if err := writeJSON(a.stdout, out); err != nil {
					return err
				}
			} else if err := printRepair(a.stdout, out); err != nil {
				return err
			}
			return repairErr
		},
	}
	f := cmd.Flags()
	f.StringVar(&container, "abandon", "", "container whose delegate to abandon")
	f.IntVar(&index, "delegate", -1, "with --abandon: index of the delegate in the chain (0 is the first)")
	f.StringVar(&ifname, "ifname", "", "with --abandon: the attachment's interface name")
	f.StringArrayVar(&fromReports, "from-report", nil, "a report of leaks --output; give two at least, --confirm-after apart")
	f.DurationVar(&confirmAfter, "confirm-after", leaks.DefaultConfirmAfter, "with --from-report: how far apart the reports must be")
	f.BoolVar(&dryRun, "dry-run", false, "with --from-report: check everything, DEL nothing")
	l.register(cmd)
	return cmd
}

// abandon marks delegate index of the container's attachment on conf's
// network abandoned.
func (a *app) abandon(ctx context.Context, eng *libchain.Engine, conf *libchain.NetConf, container, ifname string, index int) (*abandonment, error) {
	key := cache.Key{Network: conf.Name, ContainerID: container, IfName: ifname}
	if ifname == "" {
		var err error
		if key, err = onlyAttachment(eng.Store, conf.Name, container); err != nil {
			return nil, err
		}
	}
	if err := key.Validate(); err != nil {
		return nil, cli.Usagef("--abandon: %w", err)
	}
	at := a.now()
	lctx, cancel := context.WithTimeout(ctx, conf.LockTimeout)
	defer cancel()
	if err := eng.Abandon(lctx, key, index, at); err != nil {
		return nil, err
	}
	return &abandonment{Key: key, Index: index, At: at.UTC()}, nil
}

// onlyAttachment returns the one attachment of container on network.
func onlyAttachment(s cache.Store, network, container string) (cache.Key, error) {
	all, err := s.List()
	if err != nil {
		return cache.Key{}, fmt.Errorf("listing records: %w", err)
	}
	var found []cache.Key
	for _, k := range all {
		if k.Network == network && k.ContainerID == container {
			found = append(found, k)
		}
	}
	switch len(found) {
	case 0:
		return cache.Key{}, fmt.Errorf("no record of container %q on network %q", container, network)
	case 1:
		return found[0], nil
	}
	names := make([]string, len(found))
	for i, k := range found {
		names[i] = k.IfName
	}
	return cache.Key{}, cli.Usagef("container %q has %d attachments on network %q: pass --ifname (one of: %s)",
		container, len(found), network, strings.Join(names, ", "))
}

func printRepair(w io.Writer, out repairOutput) error {
	if ab := out.Abandoned; ab != nil {
		if _, err := fmt.Fprintf(w, "abandoned delegate %d of %s at %s\n", ab.Index, cli.Printable(ab.Key.String()), timestamp(ab.At)); err != nil {
			return err
		}
	}
	rep := out.RepairReport
	if len(rep.Repaired)+len(rep.Failed)+len(rep.Skipped) == 0 {
		_, err := fmt.Fprintf(w, "repair of network %q: nothing needs teardown\n", out.Network)
		return err
	}
	t := newTable(w, "RESULT", "CONTAINER", "IFNAME", "DETAIL")
	for _, k := range rep.Repaired {
		t.row("repaired", k.ContainerID, k.IfName, "-")
	}
	for _, f := range rep.Failed {
		t.row("failed", f.Key.ContainerID, f.Key.IfName, f.Error)
	}
	for _, s := range rep.Skipped {
		t.row("skipped", s.Key.ContainerID, s.Key.IfName, s.Reason)
	}
	if err := t.flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "repair of network %q: %d repaired, %d failed, %d skipped\n",
		out.Network, len(rep.Repaired), len(rep.Failed), len(rep.Skipped))
	return err
}
