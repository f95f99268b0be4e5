package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/cmd/internal/cli"
	"github.com/catena-cni/catena/libchain"
	"github.com/catena-cni/catena/node/nodeconf"
)

// Defaults of uninstall's waits: an agent pod's termination grace is 10 s;
// an agent's debounce is 250 ms.
const (
	defaultAgentTimeout = 60 * time.Second
	defaultSettle       = time.Second
)

func uninstallCmd(e env) *cobra.Command {
	var confDir, confName, binDir, cacheDir string
	var wait bool
	var agentTimeout, settle time.Duration
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove Catena's generated conflist (and with --cni-bin-dir its binaries); never the primary's",
		Long: `uninstall removes the generated conflist, only if it carries catena-agent's
generated key (catena.dev/generated); the primary's own file is never touched, so the runtime loads it
again at once. With --cni-bin-dir it also removes catena and catenactl from
that dir. It then lists the attachments that still have a record in
--cache-dir: pods created through Catena whose DEL now goes to the primary's
plugins directly.

Every running catena-agent holds the conf dir's interlock
(.catena-agent.lock, flock): uninstall first waits up to --agent-timeout for
them to exit (stop the agent: delete its DaemonSet), and fails with exit 1,
saying so and removing nothing, if one still runs. Holding the interlock it
removes the file, then checks for --settle that the file stays removed (an
older agent that knows no interlock would write it again: exit 1). Only
then does it say "removed" and exit 0.
With --wait it then blocks until SIGTERM, holding the interlock, for a
DaemonSet whose pod must stay running: an agent that starts meanwhile (a pod
restarted) writes nothing and reports not ready.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			if agentTimeout < 0 || settle < 0 {
				return cli.Usagef("--agent-timeout %s, --settle %s: must not be negative", agentTimeout, settle)
			}
			u, lock, err := nodeconf.UninstallHeld(cmd.Context(), e.fs, nodeconf.UninstallOptions{
				ConfDir: confDir, ConfName: confName, BinDir: binDir, Holder: holder("uninstall"),
				AgentTimeout: agentTimeout, Settle: settle,
				Waiting: func(reason string) {
					// A progress note: the outcome is reported either way.
					_, _ = fmt.Fprintf(e.stderr, "waiting up to %s for the agent to exit: %s\n", agentTimeout, cli.Printable(reason))
				},
			})
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, lock.Unlock()) }()
			if err := printRemoved(e.stdout, u, filepath.Join(confDir, confName)); err != nil {
				return err
			}
			if err := printRecords(e, cacheDir); err != nil {
				return err
			}
			if wait {
				<-cmd.Context().Done()
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&confDir, "cni-conf-dir", defaultConfDir, "the runtime's CNI conf dir")
	fl.StringVar(&confName, "conf-name", defaultConfName, "the generated conflist's name")
	fl.StringVar(&binDir, "cni-bin-dir", "", "also remove catena and catenactl from this dir (default: keep them)")
	fl.StringVar(&cacheDir, "cache-dir", libchain.DefaultCacheDir, "Catena's cacheDir, whose remaining records are listed")
	fl.BoolVar(&wait, "wait", false, "after uninstalling, wait for SIGTERM, holding the conf dir's interlock")
	fl.DurationVar(&agentTimeout, "agent-timeout", defaultAgentTimeout, "wait this long for running agents to exit before failing")
	fl.DurationVar(&settle, "settle", defaultSettle, "the generated file must stay removed this long (an agent that knows no interlock would write it again)")
	return cmd
}

// printRemoved says what uninstall removed.
func printRemoved(w io.Writer, u nodeconf.Uninstalled, conf string) error {
	lines := make([]string, 0, 1+len(u.Binaries))
	if u.Conf == "" {
		lines = append(lines, conf+": not present")
	} else {
		lines = append(lines, "removed "+u.Conf)
	}
	for _, b := range u.Binaries {
		lines = append(lines, "removed "+b)
	}
	if _, err := io.WriteString(w, strings.Join(lines, "\n")+"\n"); err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
}

// printRecords lists the attachments that still have a record.
func printRecords(e env, cacheDir string) error {
	if !filepath.IsAbs(cacheDir) {
		return &cli.UsageError{Err: errors.New("--cache-dir must be an absolute path")}
	}
	st := cache.NewDiskStore(e.fs, cacheDir, cache.NewFlockLocker(filepath.Join(cacheDir, cache.LocksDir)))
	keys, err := st.List()
	if err != nil {
		return fmt.Errorf("listing the records left in %s: %w", cacheDir, err)
	}
	lines := []string{fmt.Sprintf("%d attachment(s) still have a record in %s", len(keys), cacheDir)}
	for _, k := range keys {
		lines = append(lines, "  "+k.String())
	}
	if _, err := io.WriteString(e.stdout, strings.Join(lines, "\n")+"\n"); err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
}
