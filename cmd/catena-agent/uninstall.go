package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/cli"
	"github.com/catena-cni/catena/libchain"
	"github.com/catena-cni/catena/nodeconf"
)

func uninstallCmd(e env) *cobra.Command {
	var confDir, confName, binDir, cacheDir string
	var wait bool
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove Catena's generated conflist (and with --cni-bin-dir its binaries); never the primary's",
		Long: `uninstall removes the generated conflist, only if it carries catena-agent's
marker; the primary's own file is never touched, so the runtime loads it
again at once. With --cni-bin-dir it also removes catena and catenactl from
that dir. It then lists the attachments that still have a record in
--cache-dir: pods created through Catena whose DEL now goes to the primary's
plugins directly.

Stop the agent (delete its DaemonSet) first, or it writes the file again.
With --wait it then blocks until SIGTERM, for a DaemonSet whose pod must stay
running.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			u, err := nodeconf.Uninstall(e.fs, confDir, confName, binDir)
			if err != nil {
				return err
			}
			if u.Conf == "" {
				fmt.Fprintf(e.stdout, "%s: not present\n", filepath.Join(confDir, confName))
			} else {
				fmt.Fprintf(e.stdout, "removed %s\n", u.Conf)
			}
			for _, b := range u.Binaries {
				fmt.Fprintf(e.stdout, "removed %s\n", b)
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
	fl.BoolVar(&wait, "wait", false, "after uninstalling, wait for SIGTERM")
	return cmd
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
	fmt.Fprintf(e.stdout, "%d attachment(s) still have a record in %s\n", len(keys), cacheDir)
	for _, k := range keys {
		fmt.Fprintf(e.stdout, "  %s\n", k)
	}
	return nil
}
