package main

import (
	"context"
	"crypto/sha512"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/cache"
)

// scaleLevel is phase (c) at one record count.
type scaleLevel struct {
	records  int
	v        *variant      // catena on a cacheDir of its own, holding records
	seedTime time.Duration // to create the records
	lat      latencies
	rss      []rssSample // under the recorder, if -rss-n > 0
}

// scale measures catena's ADD and DEL with ever more records already in its
// cacheDir. Each record count has a cacheDir of its own (same network,
// bridge and host-local pool), so that the counts can be measured in turn,
// round after round, and a burst of load elsewhere on the node hits them
// all alike. The records are copies of a real one (the record of a real ADD
// of the same chain, under other container IDs), saved through the store
// itself: what a node holding that many attachments would have.
func (b *bench) scale(ctx context.Context) ([]*scaleLevel, error) {
	o := b.opts
	tmpl, err := b.templateRecord()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "bench: (c) scale: %v records, %d ADD+DEL each, in turn\n", o.scale, o.scaleN)
	levels := make([]*scaleLevel, len(o.scale))
	for i, n := range o.scale {
		if levels[i], err = b.seedLevel(ctx, tmpl, n); err != nil {
			return nil, err
		}
	}
	for i := range o.scaleN {
		for k := range levels {
			lv := levels[(k+i)%len(levels)]
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("interrupted: %w", err)
			}
			add, del, err := b.addDel(lv.v, fmt.Sprintf("%d", i), nil)
			if err != nil {
				return nil, fmt.Errorf("(c) %d records, iteration %d: %w", lv.records, i, err)
			}
			lv.lat.add, lv.lat.del = append(lv.lat.add, add), append(lv.lat.del, del)
		}
	}
	if o.rssN == 0 {
		return levels, nil
	}
	rec, err := b.newRecorder()
	if err != nil {
		return nil, err
	}
	for _, lv := range levels {
		if lv.rss, err = b.recordRSS(ctx, rec, lv.v); err != nil {
			return nil, fmt.Errorf("(c) %d records: %w", lv.records, err)
		}
	}
	return levels, nil
}

// seedLevel makes the catena variant of one record count and saves its n
// records.
func (b *bench) seedLevel(ctx context.Context, tmpl *cache.Record, n int) (*scaleLevel, error) {
	v := *b.catena
	v.name = fmt.Sprintf("catena%d", n)
	v.cache = filepath.Join(b.tmp, v.name, "cache")
	v.netDir = filepath.Join(b.tmp, v.name, "net.d")
	if err := v.writeConflist(); err != nil {
		return nil, err
	}
	lv := &scaleLevel{records: n, v: &v}
	store := cache.NewDiskStore(afero.NewOsFs(), v.cache, cache.NewFlockLocker(filepath.Join(v.cache, "locks")))
	start := time.Now()
	for i := range n {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("interrupted: %w", err)
		}
		if err := store.Save(seedRecord(tmpl, i)); err != nil {
			return nil, fmt.Errorf("(c) seeding record %d: %w", i, err)
		}
	}
	lv.seedTime = time.Since(start)
	got, err := countRecords(&v)
	if err != nil {
		return nil, fmt.Errorf("(c) counting the records in %s: %w", v.cache, err)
	}
	if got != n {
		return nil, fmt.Errorf("(c) want %d records in %s, have %d", n, v.cache, got)
	}
	fmt.Fprintf(os.Stderr, "bench: (c) %d records seeded in %s\n", n, lv.seedTime.Round(time.Millisecond))
	return lv, nil
}

// templateRecord makes one real ADD and returns its record, then DELs it.
func (b *bench) templateRecord() (*cache.Record, error) {
	v := b.catena
	store := cache.NewDiskStore(afero.NewOsFs(), v.cache, cache.NewFlockLocker(filepath.Join(v.cache, "locks")))
	ns := fmt.Sprintf("cbench-%d-%s-template", os.Getpid(), v.name)
	path, err := b.addNetns(ns, v)
	if err != nil {
		return nil, err
	}
	c := call{v: v, verb: "add", netns: path, port: v.hostPort}
	if _, err := b.invoke(c); err != nil {
		return nil, fmt.Errorf("(c) template ADD: %w", err)
	}
	rec, loadErr := store.Load(cache.Key{Network: v.network, ContainerID: cnitoolContainerID(path), IfName: "eth0"})
	c.verb = "del"
	if _, err := b.invoke(c); err != nil {
		return nil, fmt.Errorf("(c) template DEL: %w", err)
	}
	if err := b.delNetns(ns); err != nil {
		return nil, err
	}
	if loadErr != nil {
		return nil, fmt.Errorf("(c) reading the template record: %w", loadErr)
	}
	if rec.Phase != cache.PhaseComplete || len(rec.Steps) != 3 {
		return nil, fmt.Errorf("(c) template record: phase %s with %d steps, want complete with 3", rec.Phase, len(rec.Steps))
	}
	return rec, nil
}

// cnitoolContainerID is the container ID cnitool derives from a netns path.
func cnitoolContainerID(netns string) string {
	s := sha512.Sum512([]byte(netns))
	return fmt.Sprintf("cnitool-%x", s[:10])
}

// seedRecord is tmpl as the record of the i-th seeded attachment.
func seedRecord(tmpl *cache.Record, i int) *cache.Record {
	r := *tmpl
	r.Steps = append([]cache.Step(nil), tmpl.Steps...)
	r.Key.ContainerID = fmt.Sprintf("seed-%06d", i)
	r.NetNS = "/var/run/netns/" + r.Key.ContainerID
	r.Created = time.Now().UTC()
	return &r
}

func countRecords(v *variant) (int, error) {
	entries, err := os.ReadDir(filepath.Join(v.cache, "records", v.network))
	if os.IsNotExist(err) {
		return 0, nil
	}
	return len(entries), err
}
