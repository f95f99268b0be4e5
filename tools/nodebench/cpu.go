package nodebench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// perfFreq is the sampling frequency of a round's profile (perf record
// -a -F perfFreq): each sample is 1/perfFreq s of one CPU's time, idle
// (the command "swapper") included.
const perfFreq = 99

// PerfArgs are the arguments of perf that profile a round's whole node
// into out until perf gets SIGINT: every CPU, call graphs by frame
// pointer (Go's binaries keep them) for a later perf report -i out.
func PerfArgs(out string) []string {
	return []string{"record", "-a", "-g", "-F", strconv.Itoa(perfFreq), "-o", out}
}

// PerfReportArgs are the arguments of perf that print the samples of the
// profile in by command, the output ParsePerfComm reads.
func PerfReportArgs(in string) []string {
	return []string{"report", "-i", in, "--stdio", "--sort", "comm", "-F", "sample,comm", "-g", "none", "--no-children"}
}

// idleComm is the command perf names a CPU's idle time.
const idleComm = "swapper"

// ParsePerfComm reads the output of perf report with PerfReportArgs: the
// CPU seconds of each command, its samples over perfFreq. The threads of
// one command are one command; a kernel thread's name loses its "/..."
// suffix (kworker/0:1 counts as kworker).
func ParsePerfComm(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		count, comm, ok := strings.Cut(line, " ")
		n, err := strconv.Atoi(count)
		if !ok || err != nil || n < 0 {
			return nil, fmt.Errorf("perf report: %q is not a sample count and a command", line)
		}
		comm = strings.TrimSpace(comm)
		if i := strings.IndexByte(comm, '/'); i > 0 {
			comm = comm[:i]
		}
		out[comm] += float64(n) / perfFreq
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("perf report: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("perf report: no samples")
	}
	return out, nil
}

// cpuPerPod is the mean over v's rounds at n of each command's CPU
// seconds per pod, and how many rounds had a profile.
func cpuPerPod(rounds []Round, v Variant, n int) (map[string]float64, int) {
	sum := map[string]float64{}
	k := 0
	for _, r := range rounds {
		if r.Variant != v || r.N != n || r.CPU == nil {
			continue
		}
		k++
		for comm, s := range r.CPU {
			sum[comm] += s / float64(n)
		}
	}
	for comm := range sum {
		sum[comm] /= float64(k)
	}
	return sum, k
}

// ReportCPU writes, per N whose rounds were profiled, the CPU ms per pod
// of each command that took at least minShare of either variant's busy
// time, and of the always commands whatever they took, both variants side
// by side with the difference, busy (all but idle) and idle first; each
// line starts with Prefix. It writes nothing when no round has a profile.
func ReportCPU(w io.Writer, rounds []Round, names Names, minShare float64, always ...string) error {
	var b bytes.Buffer
	for _, n := range roundNs(rounds) {
		var cpu [2]map[string]float64
		var k [2]int
		for _, v := range Variants {
			cpu[v], k[v] = cpuPerPod(rounds, v, n)
		}
		if k[Primary] == 0 && k[Catena] == 0 {
			continue
		}
		var busy [2]float64
		for _, v := range Variants {
			for comm, s := range cpu[v] {
				if comm != idleComm {
					busy[v] += s
				}
			}
		}
		comms := slices.Clone(always)
		for _, v := range Variants {
			for comm, s := range cpu[v] {
				if comm != idleComm && busy[v] > 0 && s >= minShare*busy[v] && !slices.Contains(comms, comm) {
					comms = append(comms, comm)
				}
			}
		}
		slices.SortFunc(comms, func(a, c string) int {
			da, dc := cpu[Catena][a]-cpu[Primary][a], cpu[Catena][c]-cpu[Primary][c]
			if da != dc {
				if da > dc {
					return -1
				}
				return 1
			}
			return strings.Compare(a, c)
		})
		fmt.Fprintf(&b, "CPU N=%d, perf record -a -F %d over each round (scale up to gone); ms of CPU per pod, mean of %d rounds of %s and %d of %s; commands over %.0f%% of either's busy time, and %s\n",
			n, perfFreq, k[Primary], names.Primary, k[Catena], names.Catena, 100*minShare, strings.Join(always, ", "))
		tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)
		_, _ = fmt.Fprintf(tw, "| command\t| %s\t| %s\t| difference\t|\n", names.Primary, names.Catena)
		_, _ = fmt.Fprintf(tw, "|---\t|---\t|---\t|---\t|\n")
		row := func(label string, p, c float64) {
			_, _ = fmt.Fprintf(tw, "| %s\t| %.1f\t| %.1f\t| %+.1f\t|\n", label, 1000*p, 1000*c, 1000*(c-p))
		}
		row("busy (all but idle)", busy[Primary], busy[Catena])
		row("idle", cpu[Primary][idleComm], cpu[Catena][idleComm])
		for _, comm := range comms {
			row(comm, cpu[Primary][comm], cpu[Catena][comm])
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("cpu report: %w", err)
		}
	}
	return writePrefixed(w, &b, "cpu report")
}
