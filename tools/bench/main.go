package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	maybeRecorder() // when started as catena's stand-in (rss.go)
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		return err
	}
	if err := preflight(o); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	b, err := newBench(o)
	if err != nil {
		return err
	}
	res, runErr := b.measure(ctx)
	if err := errors.Join(runErr, b.cleanup()); err != nil {
		return err
	}
	met, err := res.report(os.Stdout, o.conc)
	if err != nil {
		return err
	}
	docs := ""
	if o.docs {
		docs = filepath.Join("docs", "bench.png")
	}
	if err := res.writePlot(o.plot, docs, o.conc); err != nil {
		return err
	}
	fmt.Printf("\nplot: %s\n", o.plot)
	if o.strict && !met {
		return errors.New("a target was not met")
	}
	return nil
}

// measure runs the selected phases in order.
func (b *bench) measure(ctx context.Context) (*results, error) {
	r := &results{}
	var err error
	if b.opts.runs("seq") {
		if r.seq, err = b.sequential(ctx); err != nil {
			return nil, err
		}
		f, err := b.floors("(a) seq", r.seq.start, r.seq.end, *r.seq.by["catena"], *r.seq.by["plain"])
		if err != nil {
			return nil, err
		}
		r.floors = append(r.floors, f...)
	}
	if b.opts.runs("conc") {
		if r.conc, err = b.concurrent(ctx); err != nil {
			return nil, err
		}
		catena := latencies{add: all(r.conc.add["catena"]), del: all(r.conc.del["catena"])}
		plain := latencies{add: all(r.conc.add["plain"]), del: all(r.conc.del["plain"])}
		f, err := b.floors("(b) conc", r.conc.start, r.conc.end, catena, plain)
		if err != nil {
			return nil, err
		}
		r.floors = append(r.floors, f...)
	}
	if b.opts.runs("scale") {
		if r.scale, err = b.scale(ctx); err != nil {
			return nil, err
		}
	}
	if b.opts.runs("pending") {
		if r.pending, err = b.pending(ctx); err != nil {
			return nil, err
		}
	}
	if b.opts.runs("cpu") {
		if r.cpu, err = b.cpu(ctx); err != nil {
			return nil, err
		}
	}
	if b.opts.runs("check") {
		if r.check, err = b.checkPhase(ctx); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func preflight(o options) error {
	if os.Geteuid() != 0 {
		return errors.New("must run as root (creates netns, bridges and iptables rules)")
	}
	var need []string
	plugins := []string{"catena"}
	if o.runs("seq") || o.runs("conc") || o.runs("scale") || o.runs("pending") || o.runs("check") {
		need = append(need, filepath.Join(o.binDir, "cnitool"))
		plugins = append(plugins, "bridge", "host-local", "portmap", "tuning")
	}
	if o.runs("pending") {
		plugins = append(plugins, "failer")
	}
	if o.runs("cpu") {
		plugins = append(plugins, "noop", "minimal")
	}
	for _, p := range plugins {
		need = append(need, filepath.Join(o.cniPath, p))
	}
	for _, p := range need {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("missing %s (run 'make plugins build'): %w", p, err)
		}
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("iproute2 is required: %w", err)
	}
	return nil
}
