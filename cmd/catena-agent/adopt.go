package main

import (
	"context"
	"log/slog"

	"github.com/catena-cni/catena/adopt"
	"github.com/catena-cni/catena/nodeconf"
)

// adopter adopts, before each write of the generated file, the primary's
// attachments found in the runtime's libcni cache; onReport, if set, receives each report.
func adopter(resultsDir, cacheDir string, log *slog.Logger, onReport func(adopt.Report)) nodeconf.Adopter {
	return func(ctx context.Context, p *nodeconf.Primary) error {
		rep, err := adopt.Adopt(ctx, adopt.Options{ResultsDir: resultsDir, CacheDir: cacheDir, ConfList: p.ConfList, Logger: log})
		if err != nil {
			return err
		}
		if onReport != nil {
			onReport(rep)
		}
		log.Info("adoption", "network", p.List.Name, "adopted", rep.Adopted, "alreadyPresent", rep.AlreadyPresent, "skipped", len(rep.Skipped))
		for _, s := range rep.Skipped {
			log.Warn("not adopted", "entry", s)
		}
		return nil
	}
}
