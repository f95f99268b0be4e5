package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// options are the bench's flags. The defaults are the full run behind the
// figures of docs/performance.md; a quick run is e.g.
//
//	go run ./tools/bench -n 5 -conc 10 -conc-rounds 1 -scale 0,1000 -scale-n 5 -rss-n 2
type options struct {
	n          int      // sequential iterations
	warmup     int      // unmeasured sequential iterations
	conc       int      // concurrent ADDs (then DELs) per burst
	concRounds int      // bursts per variant
	scale      []int    // record counts for the scale phase
	scaleN     int      // ADD+DEL per scale level
	rssN       int      // ADD+DEL per scale level under the RSS recorder
	pending    []int    // hung pending teardowns for the pending phase
	pendingN   int      // ADD+DEL per pending level
	cpuN       int      // measured rounds of the cpu phase
	cpuWarmup  int      // unmeasured rounds of the cpu phase
	cpuAlt     string   // a second catena binary measured beside the first
	checkN     int      // sequential iterations of the check phase
	phases     []string // which phases run
	plot       string   // PNG path
	docs       bool     // also copy the plot to docs/bench.png
	binDir     string
	cniPath    string
	strict     bool
}

var allPhases = []string{"seq", "conc", "scale", "pending", "cpu", "check"}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.IntVar(&o.n, "n", 30, "(a) measured sequential iterations (each: catena ADD+DEL, plain ADD+DEL)")
	fs.IntVar(&o.warmup, "warmup", 2, "(a) and (g) unmeasured warm-up iterations")
	fs.IntVar(&o.conc, "conc", 50, "(b) ADDs launched at once, then as many DELs")
	fs.IntVar(&o.concRounds, "conc-rounds", 3, "(b) bursts per variant, alternating")
	scale := fs.String("scale", "0,1000,10000", "(c) existing records in cacheDir, comma-separated, ascending")
	fs.IntVar(&o.scaleN, "scale-n", 20, "(c) ADD+DEL measured per record count")
	fs.IntVar(&o.rssN, "rss-n", 3, "(c) ADD+DEL per record count under the peak-RSS recorder (0: skip)")
	pending := fs.String("pending", "0,1,10,100", "(e) hung pending teardowns on the network, comma-separated, ascending")
	fs.IntVar(&o.pendingN, "pending-n", 40, "(e) ADD+DEL measured per hung count")
	fs.IntVar(&o.cpuN, "cpu-n", 30, "(f) measured rounds of every kind of call, each under perf stat and without")
	fs.IntVar(&o.cpuWarmup, "cpu-warmup", 2, "(f) unmeasured rounds")
	fs.StringVar(&o.cpuAlt, "cpu-alt", "", "(f) another catena binary, measured beside <cni-path>/catena in the same rounds (\"alt\")")
	fs.IntVar(&o.checkN, "check-n", 60, "(g) measured sequential iterations (each: catena ADD+CHECK+DEL, plain ADD+CHECK+DEL, catena DEL with no record); its bursts are -conc and -conc-rounds")
	phases := fs.String("phases", strings.Join(allPhases, ","), "phases to run: "+strings.Join(allPhases, ", "))
	fs.StringVar(&o.plot, "plot", "bin/bench.png", "where to write the latency CDF plot (PNG)")
	fs.BoolVar(&o.docs, "docs", false, "also copy the plot to docs/bench.png, for docs/performance.md")
	fs.StringVar(&o.binDir, "bin", envOr("CATENA_BIN", "bin"), "directory holding cnitool")
	fs.StringVar(&o.cniPath, "cni-path", os.Getenv("CATENA_CNI_PATH"), "CNI_PATH holding catena and the reference plugins (default <bin>/cni)")
	fs.BoolVar(&o.strict, "strict", false, "exit non-zero when a target is missed")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var err error
	if o.scale, err = parseInts(*scale); err != nil {
		return o, fmt.Errorf("-scale: %w", err)
	}
	if o.pending, err = parseInts(*pending); err != nil {
		return o, fmt.Errorf("-pending: %w", err)
	}
	o.phases = strings.Split(*phases, ",")
	for _, p := range o.phases {
		if !slices.Contains(allPhases, p) {
			return o, fmt.Errorf("-phases: unknown phase %q (want %s)", p, strings.Join(allPhases, ", "))
		}
	}
	if o.n < 1 || o.conc < 1 || o.concRounds < 1 || o.scaleN < 1 || o.pendingN < 1 || o.cpuN < 1 || o.checkN < 1 || o.warmup < 0 || o.rssN < 0 || o.cpuWarmup < 1 {
		return o, errors.New("-n, -conc, -conc-rounds, -scale-n, -pending-n, -cpu-n, -check-n and -cpu-warmup must be at least 1; -warmup and -rss-n at least 0")
	}
	if o.cniPath == "" {
		o.cniPath = filepath.Join(o.binDir, "cni")
	}
	if o.binDir, err = filepath.Abs(o.binDir); err != nil {
		return o, fmt.Errorf("resolve -bin: %w", err)
	}
	if o.cniPath, err = filepath.Abs(o.cniPath); err != nil {
		return o, fmt.Errorf("resolve -cni-path: %w", err)
	}
	if o.cpuAlt != "" {
		if o.cpuAlt, err = filepath.Abs(o.cpuAlt); err != nil {
			return o, fmt.Errorf("resolve -cpu-alt: %w", err)
		}
	}
	return o, nil
}

func (o options) runs(phase string) bool { return slices.Contains(o.phases, phase) }

// parseInts parses "0,1000,10000": non-negative and ascending.
func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		if v < 0 || (len(out) > 0 && v <= out[len(out)-1]) {
			return nil, fmt.Errorf("%q: counts must be non-negative and ascending", s)
		}
		out = append(out, v)
	}
	return out, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
