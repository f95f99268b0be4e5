package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// burst is one launch of opts.conc calls at once.
type burst struct {
	wall time.Duration
	each []time.Duration
	// cpu is each call's CPU time, its process's and its reaped
	// descendants' (sample), in the order of each.
	cpu []time.Duration
	// busy is the CPU time the whole node spent during the burst, all
	// cores (nodeBusy): what the burst cost, whoever paid it.
	busy time.Duration
}

// concResult is phase (b): bursts of concurrent ADDs, then of as many DELs.
type concResult struct {
	add, del   map[string][]burst // by variant name
	start, end time.Time
}

// all pools the latencies of every burst.
func all(bs []burst) []time.Duration {
	var out []time.Duration
	for _, b := range bs {
		out = append(out, b.each...)
	}
	return out
}

// durationsOf lists f of each of xs.
func durationsOf[T any](xs []T, f func(T) time.Duration) []time.Duration {
	out := make([]time.Duration, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// busies lists the bursts' node CPU times.
func busies(bs []burst) []time.Duration {
	return durationsOf(bs, func(b burst) time.Duration { return b.busy })
}

// walls lists the bursts' wall times.
func walls(bs []burst) []time.Duration {
	return durationsOf(bs, func(b burst) time.Duration { return b.wall })
}

func (b *bench) concurrent(ctx context.Context) (*concResult, error) {
	o := b.opts
	res := &concResult{add: map[string][]burst{}, del: map[string][]burst{}, start: time.Now()}
	fmt.Fprintf(os.Stderr, "bench: (b) concurrent: %d rounds of %d ADDs at once, then %d DELs, per variant\n",
		o.concRounds, o.conc, o.conc)
	for r := range o.concRounds {
		for _, v := range b.order(r) {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("interrupted: %w", err)
			}
			add, del, err := b.burstAddDel(v, r)
			if err != nil {
				return nil, fmt.Errorf("(b) %s round %d: %w", v.name, r, err)
			}
			res.add[v.name] = append(res.add[v.name], add)
			res.del[v.name] = append(res.del[v.name], del)
		}
	}
	res.end = time.Now()
	return res, nil
}

// burstAddDel creates opts.conc netns, ADDs them all at once, then DELs
// them all at once, and deletes the netns (outside the timed bursts).
func (b *bench) burstAddDel(v *variant, round int) (add, del burst, err error) {
	calls := make([]call, b.opts.conc)
	names := make([]string, b.opts.conc)
	for i := range calls {
		names[i] = fmt.Sprintf("cbench-%d-%s-c%d-%d", os.Getpid(), v.name, round, i)
		path, err := b.addNetns(names[i], v)
		if err != nil {
			return add, del, err
		}
		calls[i] = call{v: v, verb: "add", netns: path, port: v.hostPort + 1000 + i}
	}
	if add, err = b.burst(calls); err != nil {
		return add, del, fmt.Errorf("ADD: %w", err)
	}
	for i := range calls {
		calls[i].verb = "del"
	}
	if del, err = b.burst(calls); err != nil {
		return add, del, fmt.Errorf("DEL: %w", err)
	}
	for _, ns := range names {
		if err := b.delNetns(ns); err != nil {
			return add, del, err
		}
	}
	return add, del, nil
}

// burst starts every call at once and waits for all of them.
func (b *bench) burst(calls []call) (burst, error) {
	return burstOf(len(calls), func(i int) (sample, error) { return b.invokeCPU(calls[i]) })
}

// burstOf starts n calls of run at once, run(0) to run(n-1), and waits for
// all of them.
func burstOf(n int, run func(i int) (sample, error)) (burst, error) {
	out := burst{each: make([]time.Duration, n), cpu: make([]time.Duration, n)}
	busy0, err := nodeBusy() // before any call is started, so none waits on an error
	if err != nil {
		return out, err
	}
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			var s sample
			s, errs[i] = run(i)
			out.each[i], out.cpu[i] = s.wall, s.cpu
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	out.wall = time.Since(t0)
	busy1, err := nodeBusy()
	out.busy = busy1 - busy0
	return out, errors.Join(append(errs, err)...)
}
