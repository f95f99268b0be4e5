package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/cmd/internal/cli"
	"github.com/catena-cni/catena/libchain"
)

// gcOutput is what `gc --json` prints.
type gcOutput struct {
	Network string `json:"network"`
	DryRun  bool   `json:"dryRun"`
	*libchain.GCReport
}

func (a *app) gcCmd() *cobra.Command {
	var validFile string
	var opts libchain.GCOptions
	cmd := &cobra.Command{
		Use:   "gc (--valid FILE | --stale-netns) [--dry-run]",
		Short: "Tear down the attachments of the config's network that are no longer alive",
		Long: `Garbage-collect the records of the config's network, as a runtime's CNI GC
would, tearing down each dead attachment with the config cached at its ADD.

Which attachments are alive is given either by:
  --valid FILE    a JSON list of {"containerID": ..., "ifname": ...}, or an
                  object holding such a list under "cni.dev/valid-attachments"
                  (as a runtime passes it); every record not listed is dead.
                  GC is then forwarded to the delegates that support CNI 1.1.0,
                  with that list widened by what Catena still keeps alive,
                  unless --skip-delegates.
  --stale-netns   without a runtime: a record is dead only if its netns path is
                  gone or now holds another namespace than the ADD's. GC is
                  not forwarded to the delegates.

Either way a record is never touched while its lock is held (an operation is
running) or while it is younger than the config's gcGracePeriod, nor while
the network namespace of its ADD still holds a process (one look at /proc
per run), and a record that needs teardown (a failed rollback or DEL) is
retried even if listed.
Temp files that a crash left in the network's records, older than the grace
period and whose lock is free, are removed ("swept temp file"). The corrupt
records that DEL moved to <cacheDir>/quarantine/ are pruned ("pruned
quarantined record"): those quarantined more than 30 days ago, then the
oldest beyond the 100 newest. Only regular files named as catena names them
are removed; a symlink is never followed. (The runtime's CNI GC prunes
likewise.)
--dry-run reports what would be torn down and changes nothing: it tears
down, sweeps and prunes nothing. GC continues
past errors, reports them all, and then exits 1.
Like the runtime's GC, it is written to the event journal (catenactl stats,
the agent's events): one GC operation per attachment torn down or failing
to be, and one of the network; a dry run writes nothing.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (validFile == "") == !opts.StaleNetNS {
				return cli.Usagef("gc needs exactly one of --valid FILE and --stale-netns")
			}
			eng, req, closeLog, err := a.engine()
			if err != nil {
				return err
			}
			defer func() { _ = closeLog() }()
			if err := checkRecordsDir(req.Conf.CacheDir, req.Conf.Name); err != nil {
				return err
			}
			if validFile != "" {
				if opts.Valid, err = readValidFile(validFile, req.Conf.Name); err != nil {
					return err
				}
			}
			rep, gcErr := eng.CollectGarbage(cmd.Context(), req, opts)
			if rep == nil || (gcErr != nil && len(rep.Errors) == 0) {
				// GC did not get to the records (it could not list
				// them): there is no report to print.
				return gcErr
			}
			sortReport([][]cache.Key{rep.TornDown, rep.WouldTearDown}, rep.Skipped, nil)
			if a.json {
				if err := writeJSON(a.stdout, gcOutput{Network: req.Conf.Name, DryRun: opts.DryRun, GCReport: rep}); err != nil {
					return err
				}
			} else if err := printGC(a.stdout, req.Conf, opts.DryRun, rep); err != nil {
				return err
			}
			return gcErr
		},
	}
	f := cmd.Flags()
	f.StringVar(&validFile, "valid", "", "JSON file listing the live attachments (see above)")
	f.BoolVar(&opts.StaleNetNS, "stale-netns", false, "treat a record as dead only when its netns path is gone or holds another namespace")
	f.BoolVar(&opts.DryRun, "dry-run", false, "report what would be torn down; change nothing")
	f.BoolVar(&opts.SkipDelegates, "skip-delegates", false, "with --valid: do not forward GC to the delegates")
	return cmd
}

// readValidFile reads the live attachments of network: a JSON list of
// {containerID, ifname}, or an object with that list under
// cni.dev/valid-attachments. Every entry must name a valid attachment: an
// entry that matched nothing would make its live attachment look dead.
func readValidFile(path, network string) ([]libchain.Attachment, error) {
	data, err := readSmallFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the valid attachments: %w", err)
	}
	raw := json.RawMessage(bytes.TrimSpace(data))
	if len(raw) > 0 && raw[0] == '{' {
		var wrapped map[string]json.RawMessage
		if err := json.Unmarshal(raw, &wrapped); err != nil {
			return nil, fmt.Errorf("valid attachments in %s: %w", path, err)
		}
		var ok bool
		if raw, ok = wrapped["cni.dev/valid-attachments"]; !ok {
			return nil, fmt.Errorf("valid attachments in %s: the object has no \"cni.dev/valid-attachments\" list", path)
		}
	}
	var list []libchain.Attachment
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("valid attachments in %s: want a list of {\"containerID\", \"ifname\"}: %w", path, err)
	}
	if list == nil {
		return nil, fmt.Errorf("valid attachments in %s: the list is null; an empty list ([]) says nothing is alive", path)
	}
	for i, att := range list {
		key := cache.Key{Network: network, ContainerID: att.ContainerID, IfName: att.IfName}
		if err := key.Validate(); err != nil {
			return nil, fmt.Errorf("valid attachments in %s: entry %d: %w", path, i, err)
		}
	}
	return list, nil
}

func printGC(w io.Writer, conf *libchain.NetConf, dryRun bool, rep *libchain.GCReport) error {
	t := newTable(w, "ACTION", "CONTAINER", "IFNAME", "DETAIL")
	for _, k := range rep.TornDown {
		t.row("torn down", k.ContainerID, k.IfName, "-")
	}
	for _, k := range rep.WouldTearDown {
		t.row("would tear down", k.ContainerID, k.IfName, "-")
	}
	for _, s := range rep.Skipped {
		t.row("skipped", s.Key.ContainerID, s.Key.IfName, s.Reason)
	}
	for _, p := range rep.SweptTemps {
		t.row("swept temp file", "-", "-", p)
	}
	for _, p := range rep.PrunedQuarantine {
		t.row("pruned quarantined record", "-", "-", p)
	}
	for _, e := range rep.Errors {
		t.row("error", "-", "-", e)
	}
	if err := t.flush(); err != nil {
		return err
	}
	summary := fmt.Sprintf("gc of network %q: %d torn down, %d skipped, %d error(s)",
		conf.Name, len(rep.TornDown), len(rep.Skipped), len(rep.Errors))
	if n := len(rep.PrunedQuarantine); n > 0 {
		summary += fmt.Sprintf("; %d pruned from quarantine", n)
	}
	if dryRun {
		summary += "; dry run: " + strconv.Itoa(len(rep.WouldTearDown)) + " would be torn down"
	}
	if conf.DisableGC {
		summary += "; disableGC is set: nothing was collected"
	}
	_, err := fmt.Fprintln(w, summary)
	return err
}
