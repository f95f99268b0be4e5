package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// pendingLevel is phase (e) at one count of hung pending teardowns.
type pendingLevel struct {
	hung    int
	v       *variant // healthy catena on a cacheDir holding the hung records
	seeding time.Duration
	lat     latencies
	plain   []time.Duration // the plain conflist's ADDs, in the same rounds
}

// pendingConc bounds the hung DELs run at once while seeding.
const pendingConc = 25

// pending measures unrelated ADDs and DELs through catena while 0, 1, 10,
// 100 (-pending) attachments of the same network have a teardown that
// hangs: each level has a cacheDir of its own (same network, bridge and
// host-local pool) whose hung records are made for real, by an ADD of the
// chain plus a failer whose DEL hangs past delegateTimeout (5 s), then the
// runtime's DEL, which fails. Catena's detached retriers run against them
// meanwhile, as on a node. The levels are measured in turn, round after
// round, alternating with the plain conflist's ADD+DEL.
func (b *bench) pending(ctx context.Context) (_ []*pendingLevel, err error) {
	o := b.opts
	fault := filepath.Join(b.tmp, "hang")
	if err := writeFile(fault, nil); err != nil {
		return nil, err
	}
	// Lifted before the cleanup DELs them.
	defer func() { err = errors.Join(err, os.Remove(fault)) }()
	fmt.Fprintf(os.Stderr, "bench: (e) pending: %v hung teardowns, %d ADD+DEL each, in turn\n", o.pending, o.pendingN)
	levels := make([]*pendingLevel, len(o.pending))
	for i, n := range o.pending {
		if levels[i], err = b.seedPending(ctx, n, fault); err != nil {
			return nil, err
		}
	}
	for i := range o.pendingN {
		for k := range levels {
			lv := levels[(k+i)%len(levels)]
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("interrupted: %w", err)
			}
			add, del, err := b.addDel(lv.v, fmt.Sprintf("p%d", i), nil)
			if err != nil {
				return nil, fmt.Errorf("(e) %d hung, iteration %d: %w", lv.hung, i, err)
			}
			lv.lat.add, lv.lat.del = append(lv.lat.add, add), append(lv.lat.del, del)
			padd, _, err := b.addDel(b.plain, fmt.Sprintf("p%d-%d", i, lv.hung), nil)
			if err != nil {
				return nil, fmt.Errorf("(e) plain, iteration %d: %w", i, err)
			}
			lv.plain = append(lv.plain, padd)
		}
	}
	return levels, nil
}

// seedPending makes the level's healthy catena variant and n hung records
// on its cacheDir.
func (b *bench) seedPending(ctx context.Context, n int, fault string) (*pendingLevel, error) {
	v := *b.catena
	v.name = fmt.Sprintf("pending%d", n)
	v.cache = filepath.Join(b.tmp, v.name, "cache")
	v.netDir = filepath.Join(b.tmp, v.name, "net.d")
	if err := v.writeConflist(); err != nil {
		return nil, err
	}
	hung := v
	hung.name = v.name + "-hung"
	hung.netDir = filepath.Join(b.tmp, hung.name, "net.d")
	if err := os.MkdirAll(hung.netDir, 0o755); err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(hung.netDir, "10-"+hung.network+".conflist"), hungConflist(&hung, fault)); err != nil {
		return nil, err
	}
	lv := &pendingLevel{hung: n, v: &v}
	start := time.Now()
	paths := make([]string, n)
	for i := range n {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("interrupted: %w", err)
		}
		path, err := b.addNetns(fmt.Sprintf("cbench-%d-%s-%d", os.Getpid(), hung.name, i), &hung)
		if err != nil {
			return nil, err
		}
		if _, err := b.invoke(call{v: &hung, verb: "add", netns: path, port: hung.hostPort + 1000 + i}); err != nil {
			return nil, fmt.Errorf("(e) hung ADD %d: %w", i, err)
		}
		paths[i] = path
	}
	sem := make(chan struct{}, pendingConc)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i, path := range paths {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if _, err := b.invoke(call{v: &hung, verb: "del", netns: path, port: hung.hostPort + 1000 + i}); err == nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("(e) hung DEL %d succeeded", i))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	lv.seeding = time.Since(start)
	got, err := countRecords(&v)
	if err != nil {
		return nil, fmt.Errorf("(e) counting the pending records in %s: %w", v.cache, err)
	}
	if got != n {
		return nil, fmt.Errorf("(e) want %d pending records in %s, have %d", n, v.cache, got)
	}
	fmt.Fprintf(os.Stderr, "bench: (e) %d hung teardowns made in %s\n", n, lv.seeding.Round(time.Millisecond))
	return lv, nil
}

// hungConflist is v's chain plus a failer whose DEL hangs for a minute
// while fault exists, with a 5 s delegateTimeout.
func hungConflist(v *variant, fault string) []byte {
	plugins := fmt.Sprintf(`{"type":"catena","cacheDir":%q,"lockTimeout":"30s","delegateTimeout":"5s",`+
		`"capabilities":{"portMappings":true},"delegates":[%s,{"type":"failer","hangDel":"60s","faultFile":%q}]}`,
		v.cache, delegates(v, filepath.Join(v.dir, "host-local")), fault)
	return fmt.Appendf(nil, `{"cniVersion":"1.1.0","name":%q,"plugins":[%s]}`+"\n", v.network, plugins)
}

// reportPending prints phase (e) and whether the ADDs stayed flat.
func (r *results) reportPending(w *reportWriter) bool {
	w.println("\n(e) catena ADD+DEL with N hung pending teardowns on its network, sequential, the counts in turn, cnitool;")
	w.println("    the plain conflist's ADD in the same rounds")
	tw := table(w)
	_, _ = fmt.Fprintln(tw, "hung\tADD p50\tADD p99\tDEL p50\tDEL p99\tADD p50 vs 0\tADD p99 vs 0\tplain ADD p50\tcatena/plain ADD p50\tseeding\t")
	base := r.pending[0]
	ok := true
	for _, lv := range r.pending {
		a, d := lv.lat.add, lv.lat.del
		ra, r99 := ratio(median(a), median(base.lat.add)), ratio(percentile(a, 99), percentile(base.lat.add, 99))
		ok = ok && ra <= flatTarget
		_, _ = fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%.3f\t%.3f\t%s\t%.3f\t%s\t\n", lv.hung, ms(median(a)), ms(percentile(a, 99)),
			ms(median(d)), ms(percentile(d, 99)), ra, r99, ms(median(lv.plain)), ratio(median(a), median(lv.plain)), lv.seeding.Round(1e6))
	}
	_ = tw.Flush()
	w.printf("flat: every ADD p50 <= %.2f x that with 0 hung: %s\n", flatTarget, verdict(ok))
	return ok
}
