package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/catena-cni/catena/libchain/events"
	"github.com/catena-cni/catena/libchain/invoke"
	"github.com/catena-cni/catena/node/agent"
	"github.com/catena-cni/catena/node/kevents"
	"github.com/catena-cni/catena/node/leaks"
)

// ReasonLeaksFound is the Node's Warning when the leaks Catena did not make
// grow.
const ReasonLeaksFound = "CatenaLeaksFound"

const defaultLeakInterval = 10 * time.Minute

type leakWatchFlags struct {
	interval, releaseAfter, minAge time.Duration
}

func (l *leakWatchFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.DurationVar(&l.interval, "leak-interval", defaultLeakInterval, "look for leaks Catena did not make (as catenactl leaks) this often, with the reconciler (0: never)")
	fl.DurationVar(&l.minAge, "leak-min-age", leaks.DefaultMinAge, "a finding younger than this is kept")
	fl.DurationVar(&l.releaseAfter, "release-leaks-after", 0, "release a leak that two scans at least this far apart and the latest agree on, as catenactl repair --from-report does (0: release nothing, the default)")
}

// setup is the leak watcher's component: none without the reconciler's
// runtime connection, or with --leak-interval 0.
func (l *leakWatchFlags) setup(obs *observability, f *installFlags, ef *eventsFlags, cniPath []string, log *slog.Logger) []agent.Named {
	if l.interval <= 0 || obs.lister == nil {
		return nil
	}
	cacheDir := f.cfg.Catena.CacheDir
	on := leaks.OnNode{ConfDir: f.cfg.ConfDir, ResultsDir: f.resultsDir, CacheDir: cacheDir, Sandboxes: obs.lister,
		Runtime: "the reconciler's runtime", Node: ef.node, MinAge: l.minAge,
		CNIPath: strings.Join(cniPath, string(filepath.ListSeparator)), Exec: invoke.NewExec(os.Stderr), OnOp: events.OnOp(nil, cacheDir, log)}
	s, err := on.Scanner()
	if err != nil {
		log.Warn("leaks: no leak scan", "error", err)
		return nil
	}
	w := leaks.NewWatcher(obs.metrics.Registry, leaks.Watcher{Scanner: s, Interval: l.interval, ReleaseAfter: l.releaseAfter, Log: log.With("component", "leaks"),
		Releaser: on.Releaser(false),
		OnGrow: func(total int, summary string) {
			log.Warn("leaks Catena did not make", "leaks", total, "by", summary)
			if ef.emitter != nil && ef.node != "" {
				ef.emitter.Emit(kevents.Fact{Object: kevents.Object{Kind: "Node", Name: ef.node}, Type: kevents.Warning, Reason: ReasonLeaksFound,
					Message: fmt.Sprintf("%d leaks Catena did not make on this node (%s): catenactl leaks lists them; docs/troubleshooting.md, IPs leaked before Catena", total, summary)})
			}
		}})
	if l.releaseAfter < 0 {
		log.Error("leaks: --release-leaks-after is negative: releasing nothing")
		w.ReleaseAfter = 0
	}
	return []agent.Named{{Name: "leaks", Runnable: w}}
}
