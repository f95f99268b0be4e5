package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/cmd/internal/cli"
)

func (a *app) showCmd() *cobra.Command {
	var ifname, network string
	cmd := &cobra.Command{
		Use:   "show <container-id>",
		Short: "Show the full record of a container's attachments",
		Long: `Show the full record of each attachment of a container (of every network and
ifname, unless --network or --ifname narrow it down): its phase, netns, args,
timestamps, teardown attempts and errors, then every delegate in chain order
with its state, timings, DEL attempts and errors, the config cached at ADD
(which DEL reuses) and its result. With --json, the records exactly as stored,
as a JSON array.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cacheDir, entries, err := a.cacheEntries()
			if err != nil {
				return err
			}
			var recs []*cache.Record
			var errs []error
			for _, e := range entries {
				k := e.Key
				if k.ContainerID != args[0] || (ifname != "" && k.IfName != ifname) || (network != "" && k.Network != network) {
					continue
				}
				if e.Err != nil {
					errs = append(errs, fmt.Errorf("record of %s: %w", k, e.Err))
					continue
				}
				recs = append(recs, e.Rec)
			}
			if len(recs) == 0 && len(errs) == 0 {
				return fmt.Errorf("no record of container %q%s in %s", args[0], narrowing(network, ifname), cacheDir)
			}
			if a.json {
				if recs == nil {
					recs = []*cache.Record{}
				}
				if err := writeJSON(a.stdout, recs); err != nil {
					return err
				}
			} else {
				s := store(cacheDir)
				for i, rec := range recs {
					if i > 0 {
						if _, err := fmt.Fprintln(a.stdout); err != nil {
							return fmt.Errorf("writing output: %w", err)
						}
					}
					if err := a.printRecord(a.stdout, rec, s.Path(rec.Key)); err != nil {
						return err
					}
				}
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().StringVar(&ifname, "ifname", "", "show only the attachment with this interface name")
	cmd.Flags().StringVar(&network, "network", "", "show only the attachment on this network")
	return cmd
}

func narrowing(network, ifname string) string {
	s := ""
	if network != "" {
		s += " on network " + strconv.Quote(network)
	}
	if ifname != "" {
		s += " with ifname " + strconv.Quote(ifname)
	}
	return s
}

func (a *app) printRecord(w io.Writer, rec *cache.Record, path string) error {
	kv := newTable(w, "attachment", rec.Key.String())
	kv.row("record", path)
	kv.row("phase", string(rec.Phase))
	kv.row("cniVersion", rec.CNIVersion)
	kv.row("netns", orDash(rec.NetNS))
	kv.row("args", orDash(rec.Args))
	kv.row("created", timestamp(rec.Created)+" ("+humanAge(a.now().Sub(rec.Created))+" ago)")
	kv.row("updated", timestamp(rec.Updated))
	kv.row("teardown attempts", strconv.Itoa(rec.TeardownAttempts))
	kv.row("last error", orDash(rec.LastError))
	kv.row("add error", orDash(rec.AddError))
	if err := kv.flush(); err != nil {
		return err
	}
	p := &printer{w: w}
	p.printf("\n")
	if err := p.err(); err != nil {
		return err
	}
	st := newTable(w, "INDEX", "TYPE", "VERSION", "STATE", "ADD-TIME", "DELS", "ABANDONED", "ERROR")
	for _, s := range rec.Steps {
		took := "-"
		if !s.Started.IsZero() && !s.Finished.IsZero() {
			took = humanDuration(s.Finished.Sub(s.Started))
		}
		st.row(strconv.Itoa(s.Index), s.Type, s.CNIVersion, string(s.State), took,
			strconv.Itoa(s.DelAttempts), timestamp(s.AbandonedAt), stepErrors(s))
	}
	if err := st.flush(); err != nil {
		return err
	}
	p.printf("\n")
	for _, s := range rec.Steps {
		p.printf("delegate %d (%s) config: %s\n", s.Index, cli.Printable(s.Type), cli.Printable(orDash(string(s.Config))))
		if len(s.Result) > 0 {
			p.printf("delegate %d (%s) result: %s\n", s.Index, cli.Printable(s.Type), cli.Printable(string(s.Result)))
		}
	}
	if len(rec.Result) > 0 {
		p.printf("result: %s\n", cli.Printable(string(rec.Result)))
	}
	if len(rec.PrevResult) > 0 {
		p.printf("prevResult: %s\n", cli.Printable(string(rec.PrevResult)))
	}
	return p.err()
}

// stepErrors renders a step's ADD and last DEL errors for one cell.
func stepErrors(s cache.Step) string {
	switch {
	case s.Error != "" && s.DelError != "":
		return "ADD: " + s.Error + "; DEL: " + s.DelError
	case s.Error != "":
		return "ADD: " + s.Error
	case s.DelError != "":
		return "DEL: " + s.DelError
	}
	return "-"
}
