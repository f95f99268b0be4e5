package nodebench

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The environment the harness reads; make bench-node sets it (the
// Makefile's BENCH_NODE_* variables), make test leaves it unset.
const (
	// envCounts is the list of N, comma-separated ("30,60")
	envCounts = "CATENA_BENCH_NODE_N"
	// envRounds is how many rounds each variant runs per N
	envRounds = "CATENA_BENCH_NODE_ROUNDS"
	// envOut is the directory the CSV files and the plot go to
	envOut = "CATENA_BENCH_NODE_OUT"
	// envDocs, when set, is the docs directory the plot is also written
	// to, as node-density.png
	envDocs = "CATENA_BENCH_NODE_DOCS"
	// envPerf, when set, profiles each round with perf (PerfArgs) into
	// the perf/ directory of the output and reports the CPU by command
	// (ReportCPU)
	envPerf = "CATENA_BENCH_NODE_PERF"
)

// The harness test's size when the environment sets none: one round of
// each variant with 3 pods, cheap enough for make test.
const (
	defaultCount  = 3
	defaultRounds = 1
	// maxCount bounds N: the node's flannel subnet is a /24
	maxCount = 200
)

// Config is one run's size and where it writes.
type Config struct {
	Counts []int
	Rounds int
	Out    string // "": the caller's temp dir
	Docs   string // "": no copy of the plot into the docs
	Perf   bool   // profile each round (envPerf)
}

// ConfigFromEnv reads the Config from getenv (os.Getenv), defaults for
// what is unset.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{Counts: []int{defaultCount}, Rounds: defaultRounds, Out: getenv(envOut), Docs: getenv(envDocs),
		Perf: getenv(envPerf) != ""}
	if v := getenv(envCounts); v != "" {
		counts, err := parseCounts(v)
		if err != nil {
			return Config{}, fmt.Errorf("%s: %w", envCounts, err)
		}
		c.Counts = counts
	}
	if v := getenv(envRounds); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return Config{}, fmt.Errorf("%s: %q is not a positive number of rounds", envRounds, v)
		}
		c.Rounds = n
	}
	return c, nil
}

// parseCounts parses a comma-separated list of N ("30,60"): each from 1
// to maxCount, none twice, in the order given.
func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > maxCount {
			return nil, fmt.Errorf("%q is not a number of pods from 1 to %d", f, maxCount)
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("%d given twice", n)
		}
		out = append(out, n)
	}
	return out, nil
}

// Variant is how the node runs in a round.
type Variant int

const (
	// Primary is the primary CNI plugin alone
	Primary Variant = iota
	// Catena is Catena installed over the primary
	Catena
)

// Variants are both, in the report's order.
var Variants = []Variant{Primary, Catena}

func (v Variant) String() string {
	if v == Catena {
		return "catena"
	}
	return "primary"
}

// Schedule is the variants of 2*rounds rounds, alternating A B B A A B
// B A ...: each runs rounds times, each pair after the first switches
// once, and neither always goes first.
func Schedule(rounds int) []Variant {
	out := make([]Variant, 2*rounds)
	for i := range out {
		out[i] = Variant((i + 1) / 2 % 2)
	}
	return out
}

// ParseLoadAvg is the 1-minute load average of /proc/loadavg's content.
func ParseLoadAvg(content string) (float64, error) {
	f := strings.Fields(content)
	if len(f) == 0 {
		return 0, errors.New("loadavg: empty")
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, fmt.Errorf("loadavg: %w", err)
	}
	return v, nil
}
