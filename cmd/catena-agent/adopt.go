package main

import (
	"context"
	"log/slog"

	"github.com/catena-cni/catena/node/adopt"
	"github.com/catena-cni/catena/node/nodeconf"
)

// adopter adopts the primary's attachments found in the runtime's libcni
// cache that have no record, before each write of the generated file and on
// every pass; one adopt.Adopter serves every pass, so a pass reads only the
// entries that are new. onReport, if set, receives each report.
func adopter(resultsDir, cacheDir string, log *slog.Logger, onReport func(adopt.Report)) nodeconf.Adopter {
	var a *adopt.Adopter
	return func(ctx context.Context, p *nodeconf.Primary) error {
		if a == nil {
			var err error
			if a, err = adopt.New(adopt.Options{ResultsDir: resultsDir, CacheDir: cacheDir, Logger: log}); err != nil {
				return err
			}
		}
		dir := make([][]byte, len(p.DirPlugins))
		for n, dp := range p.DirPlugins {
			dir[n] = dp.Raw
		}
		rep, err := a.AdoptWithDir(ctx, p.ConfList, dir)
		if err != nil {
			return err
		}
		if onReport != nil {
			onReport(rep)
		}
		level := slog.LevelDebug
		if rep.Adopted > 0 || len(rep.Refused) > 0 {
			level = slog.LevelInfo
		}
		log.Log(ctx, level, "adoption", "network", p.List.Name, "adopted", rep.Adopted, "alreadyPresent", rep.AlreadyPresent,
			"skipped", len(rep.Skipped), "refused", len(rep.Refused))
		return nil
	}
}
