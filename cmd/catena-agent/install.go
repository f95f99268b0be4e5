package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/catena-cni/catena/node/nodeconf"
)

func installCmd(e env) *cobra.Command {
	var f installFlags
	var once bool
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Wrap the primary CNI config in Catena's generated conflist and install Catena's binaries",
		Long: `install copies catena and catenactl into --cni-bin-dir, chooses the primary
network config, adopts its existing attachments and writes the generated
conflist, each only when something changed.

With --once it does one pass and exits 0 if everything is in place (written
now or already), or 1 with the reason if not, e.g. when there is no usable
primary, in which case it writes no config, or when a running catena-agent
(or uninstall) holds the conf dir's interlock (.catena-agent.lock). Without --once it keeps
everything current (fsnotify on the conf dir and a periodic --resync) until
SIGTERM or SIGINT, and then exits 0 leaving every file in place: pods created
while the agent is down still go through Catena.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inst, err := f.installer(e, "install")
			if err != nil {
				return err
			}
			if !once {
				return inst.Watch(cmd.Context(), f.resync)
			}
			st, err := syncOnce(cmd.Context(), inst)
			if err != nil {
				return err
			}
			state := "already in place"
			if st.Wrote {
				state = "written"
			}
			if _, err := fmt.Fprintf(e.stdout, "%s/%s: %s, wrapping %s\n", f.cfg.ConfDir, f.cfg.ConfName, state, st.Primary); err != nil {
				return fmt.Errorf("writing output: %w", err)
			}
			return nil
		},
	}
	f.register(cmd, e)
	cmd.Flags().BoolVar(&once, "once", false, "do one pass and exit")
	return cmd
}

// syncOnce is install --once's pass: stale temp files swept, one Sync,
// the interlock released.
func syncOnce(ctx context.Context, inst *nodeconf.Installer) (st nodeconf.Status, err error) {
	defer func() { err = errors.Join(err, inst.Close()) }()
	if _, err := inst.SweepTemp(); err != nil {
		inst.Log.Warn("sweeping stale temp files", "error", err)
	}
	return inst.Sync(ctx)
}
