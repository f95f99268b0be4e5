package main

import (
	"context"
	"fmt"
	"os"
	"time"
)

// latencies of one variant in one phase.
type latencies struct {
	add, del []time.Duration
}

// seqResult is phase (a): ADD then DEL, one attachment at a time, the two
// variants alternating.
type seqResult struct {
	by         map[string]*latencies // by variant name
	start, end time.Time             // of the measured iterations
}

func (b *bench) sequential(ctx context.Context) (*seqResult, error) {
	o := b.opts
	res := &seqResult{by: map[string]*latencies{b.catena.name: {}, b.plain.name: {}}}
	fmt.Fprintf(os.Stderr, "bench: (a) sequential: %d warm-up + %d measured iterations\n", o.warmup, o.n)
	for i := range o.warmup + o.n {
		measured := i >= o.warmup
		if i == o.warmup {
			res.start = time.Now()
		}
		for _, v := range b.order(i) {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("interrupted: %w", err)
			}
			add, del, err := b.addDel(v, fmt.Sprintf("s%d", i), nil)
			if err != nil {
				return nil, fmt.Errorf("(a) %s iteration %d: %w", v.name, i, err)
			}
			if measured {
				l := res.by[v.name]
				l.add, l.del = append(l.add, add), append(l.del, del)
			}
		}
		if measured && (i-o.warmup+1)%10 == 0 {
			fmt.Fprintf(os.Stderr, "bench: (a) %d/%d\n", i-o.warmup+1, o.n)
		}
	}
	res.end = time.Now()
	return res, nil
}

// addDel runs one ADD and one DEL of v in a fresh netns and returns their
// latencies. The netns is created and deleted outside the timed region.
// tweak, if set, adjusts both calls (another CNI_PATH, more env).
func (b *bench) addDel(v *variant, tag string, tweak func(*call)) (add, del time.Duration, err error) {
	ns := fmt.Sprintf("cbench-%d-%s-%s", os.Getpid(), v.name, tag)
	path, err := b.addNetns(ns, v)
	if err != nil {
		return 0, 0, err
	}
	c := call{v: v, verb: "add", netns: path, port: v.hostPort}
	if tweak != nil {
		tweak(&c)
	}
	if add, err = b.invoke(c); err != nil {
		return 0, 0, fmt.Errorf("ADD: %w", err)
	}
	c.verb = "del"
	if del, err = b.invoke(c); err != nil {
		return 0, 0, fmt.Errorf("DEL: %w", err)
	}
	return add, del, b.delNetns(ns)
}
