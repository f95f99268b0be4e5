package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/libchain/events"
)

// Phase (f) cpu: catena's own CPU per call. Every kind of call below runs
// as a whole process with its children, counted by `perf stat -e
// task-clock` (its counters follow the children), side by side in the same
// rounds:
//
//	minimal                 a static Go binary that prints one line
//	noop <VERB>             the no-op delegate alone
//	catena <VERB>           catena over three no-op delegates
//	traced <VERB>           the same, called with a trace context in its
//	                        environment (TRACEPARENT, TRACESTATE, BAGGAGE), as
//	                        libcni v1.3.1 passes a traced runtime's span
//
// catena's share of a call is its median less the medians of the noop
// alone for each delegate call it made (counted from its event journal in
// the warm-up), and the ratio is that share over the minimal binary's
// median. Each kind also runs once per round without perf, for wait4's
// rusage: utime+stime (the same count, from the scheduler's clock; the
// fallback when perf cannot count), and catena's own peak RSS (VmHWM at its
// exit stop, see runTraced).

// cpuTarget is the largest acceptable ratio of catena's share of a call to
// the minimal Go binary's CPU.
const cpuTarget = 1.5

// cpuKind is one kind of measured call.
type cpuKind struct {
	name   string
	bin    string
	verb   string // CNI_COMMAND; "" for minimal
	catena bool
	// attach is the attachment the call is about, per round ("" none).
	attach func(round int) string
	// stdin is the config; prev is the result of the round's ADD.
	stdin func(prev []byte) []byte
	cache string // catena's cacheDir
	// env is added to the call's environment.
	env []string
}

// traceEnv is the trace context of the traced kinds: a sampled
// traceparent, and a tracestate and baggage of the size a runtime's might
// have.
var traceEnv = []string{"TRACEPARENT=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	"TRACESTATE=congo=t61rcWkgMzE,rojo=00f067aa0ba902b7", "BAGGAGE=k8s.pod.name=web-1,k8s.namespace.name=default"}

// cpuSample is one run of one kind.
type cpuSample struct {
	clock  time.Duration // task-clock, whole call with children
	rusage time.Duration // utime+stime of the call and its reaped children
	maxrss int64         // kB: VmHWM, the process alone
}

// cpuResult is phase (f).
type cpuResult struct {
	perf       bool // task-clock from perf stat; else from rusage
	kinds      []cpuKind
	perfRuns   map[string][]cpuSample // under perf stat
	direct     map[string][]cpuSample // without perf: rusage and RSS
	calls      map[string][]string    // catena kind -> its delegate calls' verbs
	loadBefore string
	loadAfter  string
	binSize    int64 // catena's binary, bytes
}

// cpuEnv is what the phase runs in: its own cacheDir and netns.
type cpuEnv struct {
	dir, cache, netns, network string
	cniPath                    string // where the noops are
	perf                       string // perf's path, "" if it cannot count
}

func (b *bench) cpu(ctx context.Context) (_ *cpuResult, err error) {
	o := b.opts
	env := &cpuEnv{dir: filepath.Join(b.tmp, "cpu"), network: fmt.Sprintf("catena-bench-cpu-%d", os.Getpid()), cniPath: o.cniPath}
	env.cache = filepath.Join(env.dir, "cache")
	if err := os.MkdirAll(env.dir, 0o755); err != nil {
		return nil, fmt.Errorf("(f) %w", err)
	}
	ns := fmt.Sprintf("cbench-%d-cpu", os.Getpid())
	if err := ipCmd("netns", "add", ns); err != nil {
		return nil, fmt.Errorf("(f) %w", err)
	}
	defer func() { err = errors.Join(err, ipCmd("netns", "del", ns)) }()
	env.netns = filepath.Join("/var/run/netns", ns)
	env.perf = findPerf()

	res := &cpuResult{perf: env.perf != "", kinds: b.cpuKinds(env), perfRuns: map[string][]cpuSample{},
		direct: map[string][]cpuSample{}, calls: map[string][]string{}, loadBefore: loadAvg()}
	if st, err := os.Stat(filepath.Join(o.cniPath, "catena")); err == nil {
		res.binSize = st.Size()
	}
	how := "perf stat -e task-clock"
	if !res.perf {
		how = "rusage (perf stat cannot count here)"
	}
	fmt.Fprintf(os.Stderr, "bench: (f) cpu: %d warm-up + %d measured rounds of %d kinds, CPU by %s\n", o.cpuWarmup, o.cpuN, len(res.kinds), how)
	for round := range o.cpuWarmup + o.cpuN {
		measured := round >= o.cpuWarmup
		// Alternate which of the two runs of a kind comes first.
		for k, underPerf := range []bool{round%2 == 0, round%2 == 1} {
			if underPerf && !res.perf {
				continue
			}
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("interrupted: %w", err)
			}
			var prev []byte
			for _, kind := range inTurn(res.kinds, round) {
				attach := ""
				if kind.attach != nil {
					attach = fmt.Sprintf("%s-%d", kind.attach(round), k)
				}
				start := time.Now()
				s, out, err := env.run(kind, attach, kind.stdin(prev), underPerf)
				if err != nil {
					return nil, fmt.Errorf("(f) round %d: %s: %w", round, kind.name, err)
				}
				if kind.verb == "ADD" && kind.catena {
					prev = out
				}
				if round == 0 && k == 0 && kind.catena {
					if res.calls[kind.name], err = delegateCalls(kind.cache, start); err != nil {
						return nil, fmt.Errorf("(f) %s: %w", kind.name, err)
					}
				}
				if !measured {
					continue
				}
				if underPerf {
					res.perfRuns[kind.name] = append(res.perfRuns[kind.name], s)
				} else {
					res.direct[kind.name] = append(res.direct[kind.name], s)
				}
			}
		}
		if measured && (round-o.cpuWarmup+1)%10 == 0 {
			fmt.Fprintf(os.Stderr, "bench: (f) %d/%d\n", round-o.cpuWarmup+1, o.cpuN)
		}
	}
	res.loadAfter = loadAvg()
	return res, nil
}

// cpuKinds lists the calls of one round, in order: the ADD comes before the
// CHECK and DEL of its attachment. catena's calls run again with a trace
// context ("traced"), on a cacheDir of their own. With -cpu-alt, a second
// catena binary ("alt") runs the same calls on a cacheDir of its own, in
// the same rounds.
func (b *bench) cpuKinds(env *cpuEnv) []cpuKind {
	bin := func(name string) string { return filepath.Join(b.opts.cniPath, name) }
	noopConf := fmt.Appendf(nil, `{"cniVersion":"1.1.0","name":%q,"type":"noop"}`, env.network)
	noop := func([]byte) []byte { return noopConf }
	kinds := []cpuKind{{name: "minimal", bin: bin("minimal"), stdin: noop}}
	for _, v := range []string{"ADD", "DEL", "CHECK", "STATUS", "GC"} {
		kinds = append(kinds, cpuKind{name: "noop " + v, bin: bin("noop"), verb: v, stdin: noop})
	}
	kinds = append(kinds, catenaKinds("catena", bin("catena"), env.network, env.cache, nil)...)
	kinds = append(kinds, catenaKinds("traced", bin("catena"), env.network, env.cache+"-traced", traceEnv)...)
	if b.opts.cpuAlt != "" {
		kinds = append(kinds, catenaKinds("alt", b.opts.cpuAlt, env.network, env.cache+"-alt", nil)...)
	}
	return kinds
}

// inTurn is kinds in the order of round: every other round runs the
// "traced" and "alt" kinds before catena's, so that none always runs first.
func inTurn(kinds []cpuKind, round int) []cpuKind {
	if round%2 == 0 {
		return kinds
	}
	var head, cat, others []cpuKind
	for _, k := range kinds {
		switch {
		case strings.HasPrefix(k.name, "catena "):
			cat = append(cat, k)
		case strings.HasPrefix(k.name, "alt "), strings.HasPrefix(k.name, "traced "):
			others = append(others, k)
		default:
			head = append(head, k)
		}
	}
	return append(append(head, others...), cat...)
}

// catenaKinds are the calls of one catena binary over three noops.
func catenaKinds(label, path, network, cacheDir string, env []string) []cpuKind {
	conf := fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"type":"catena","cacheDir":%q,`+
		`"delegates":[{"type":"noop"},{"type":"noop"},{"type":"noop"}]`, network, cacheDir)
	plain := func(extra string) func([]byte) []byte {
		return func([]byte) []byte { return []byte(conf + extra + "}") }
	}
	withPrev := func(prev []byte) []byte {
		return []byte(conf + `,"prevResult":` + string(bytes.TrimSpace(prev)) + "}")
	}
	attached := func(r int) string { return fmt.Sprintf("%s%d", label, r) }
	never := func(r int) string { return fmt.Sprintf("%s-none%d", label, r) }
	k := func(verb, suffix string, attach func(int) string, stdin func([]byte) []byte) cpuKind {
		return cpuKind{name: label + " " + verb + suffix, bin: path, verb: verb, catena: true, attach: attach, stdin: stdin, cache: cacheDir, env: env}
	}
	return []cpuKind{
		k("ADD", "", attached, plain("")),
		k("CHECK", "", attached, withPrev),
		k("DEL", "", attached, withPrev),
		k("DEL", " no record", never, plain("")),
		k("STATUS", "", nil, plain("")),
		k("GC", "", nil, plain(`,"cni.dev/valid-attachments":[]`)),
	}
}

// run runs one call of kind, under perf stat or not, and returns its
// sample and stdout.
func (env *cpuEnv) run(kind cpuKind, attach string, stdin []byte, underPerf bool) (cpuSample, []byte, error) {
	envv := []string{"PATH=" + os.Getenv("PATH"), "CNI_PATH=" + env.cniPath}
	if kind.verb != "" {
		envv = append(envv, "CNI_COMMAND="+kind.verb)
	}
	if attach != "" {
		envv = append(envv, "CNI_CONTAINERID="+attach, "CNI_IFNAME=eth0", "CNI_NETNS="+env.netns)
	}
	envv = append(envv, kind.env...)
	if !underPerf {
		return env.runTraced(kind.bin, envv, stdin)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	perfOut := filepath.Join(env.dir, "perf.txt")
	cmd := exec.CommandContext(ctx, env.perf, "stat", "-x,", "-e", "task-clock", "-o", perfOut, "--", kind.bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = envv
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &out, &errOut
	if err := cmd.Run(); err != nil {
		return cpuSample{}, nil, fmt.Errorf("%w: %s %s", err, strings.TrimSpace(out.String()), strings.TrimSpace(errOut.String()))
	}
	clock, err := readTaskClock(perfOut)
	if err != nil {
		return cpuSample{}, nil, err
	}
	return cpuSample{clock: clock}, out.Bytes(), nil
}

// runTraced runs bin as a direct child under ptrace, asking only for its
// exit stop (rss.go), with stdio in files: the sample's rusage is wait4's
// utime+stime, its maxrss the process's own VmHWM at its exit. wait4's
// ru_maxrss is not used: the kernel carries the parent's peak over fork and
// exec, so every child of the bench would show the bench's.
func (env *cpuEnv) runTraced(bin string, envv []string, stdin []byte) (cpuSample, []byte, error) {
	var files [3]*os.File
	for i := range files {
		f, err := os.CreateTemp(env.dir, "stdio-")
		if err != nil {
			return cpuSample{}, nil, err
		}
		defer func() { _ = os.Remove(f.Name()) }()
		defer func() { _ = f.Close() }()
		files[i] = f
	}
	if _, err := files[0].Write(stdin); err != nil {
		return cpuSample{}, nil, err
	}
	if _, err := files[0].Seek(0, 0); err != nil {
		return cpuSample{}, nil, err
	}
	runtime.LockOSThread() // the tracer is the thread that forked
	defer runtime.UnlockOSThread()
	pid, err := syscall.ForkExec(bin, []string{bin}, &syscall.ProcAttr{
		Env: envv, Files: []uintptr{files[0].Fd(), files[1].Fd(), files[2].Fd()},
		Sys: &syscall.SysProcAttr{Ptrace: true, Setpgid: true},
	})
	if err != nil {
		return cpuSample{}, nil, fmt.Errorf("start %s: %w", bin, err)
	}
	hwm, ru, code, err := traceToExit(pid)
	if err != nil {
		return cpuSample{}, nil, err
	}
	out, err := os.ReadFile(files[1].Name())
	if err != nil {
		return cpuSample{}, nil, fmt.Errorf("%s's stdout: %w", bin, err)
	}
	if code != 0 {
		errOut, _ := os.ReadFile(files[2].Name())
		return cpuSample{}, nil, fmt.Errorf("exit %d: %s %s", code, strings.TrimSpace(string(out)), strings.TrimSpace(string(errOut)))
	}
	return cpuSample{rusage: time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime)), maxrss: hwm}, out, nil
}

// delegateCalls is the verbs of the delegate calls of the last operation in
// the phase's event journal that started at or after since.
func delegateCalls(cacheDir string, since time.Time) ([]string, error) {
	ops, _, err := events.Read(afero.NewOsFs(), cacheDir, since)
	if err != nil {
		return nil, err
	}
	if len(ops) == 0 {
		return nil, errors.New("no operation in catena's event journal")
	}
	verbs := []string{}
	for _, c := range ops[len(ops)-1].Calls {
		verbs = append(verbs, c.Verb)
	}
	return verbs, nil
}

// findPerf returns perf's path if `perf stat -e task-clock` counts here.
func findPerf() string {
	p, err := exec.LookPath("perf")
	if err != nil {
		return ""
	}
	out, err := exec.Command(p, "stat", "-x,", "-e", "task-clock", "--", "true").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "task-clock") || strings.Contains(string(out), "not counted") {
		return ""
	}
	return p
}

// readTaskClock parses perf stat -x, output: "<msec>,msec,task-clock,...".
func readTaskClock(path string) (time.Duration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("perf output: %w", err)
	}
	return parseTaskClock(string(data))
}

func parseTaskClock(out string) (time.Duration, error) {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, ",")
		if len(f) < 3 || f[2] != "task-clock" {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil || f[1] != "msec" {
			return 0, fmt.Errorf("perf task-clock %q: not msec", line)
		}
		return time.Duration(v * float64(time.Millisecond)), nil
	}
	return 0, fmt.Errorf("no task-clock in perf output %q", out)
}

// loadAvg is the first three fields of /proc/loadavg.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// cpuRow is one kind's line of the table.
type cpuRow struct {
	name         string
	calls        string
	clock, ru    time.Duration // medians
	share, ratio float64       // ms and x minimal; catena kinds only
	rssMed, rssM int64         // kB
	catena       bool
}

// rows computes the table: medians, and for catena kinds the share (of
// task-clock, or of rusage without perf) and its ratio to minimal.
func (r *cpuResult) rows() []cpuRow {
	pick := func(ss []cpuSample) time.Duration {
		ds := make([]time.Duration, len(ss))
		for i, s := range ss {
			ds[i] = s.rusage
			if r.perf {
				ds[i] = s.clock
			}
		}
		return median(ds)
	}
	cpuOf := func(name string) time.Duration {
		if r.perf {
			return pick(r.perfRuns[name])
		}
		return pick(r.direct[name])
	}
	minimal := cpuOf("minimal")
	var rows []cpuRow
	for _, k := range r.kinds {
		row := cpuRow{name: k.name, catena: k.catena}
		var clocks, rus []time.Duration
		var rss []time.Duration // kB, as durations for median()
		for _, s := range r.perfRuns[k.name] {
			clocks = append(clocks, s.clock)
		}
		for _, s := range r.direct[k.name] {
			rus = append(rus, s.rusage)
			rss = append(rss, time.Duration(s.maxrss))
			row.rssM = max(row.rssM, s.maxrss)
		}
		row.clock, row.ru, row.rssMed = median(clocks), median(rus), int64(median(rss))
		if k.catena {
			share := cpuOf(k.name)
			counts := map[string]int{}
			for _, v := range r.calls[k.name] {
				share -= cpuOf("noop " + v)
				counts[v]++
			}
			row.calls = callSummary(r.calls[k.name], counts)
			row.share = float64(share) / float64(time.Millisecond)
			row.ratio = ratio(share, minimal)
		}
		rows = append(rows, row)
	}
	return rows
}

func callSummary(verbs []string, counts map[string]int) string {
	if len(verbs) == 0 {
		return "none"
	}
	var parts []string
	seen := map[string]bool{}
	for _, v := range verbs {
		if !seen[v] {
			seen[v] = true
			parts = append(parts, fmt.Sprintf("%dx%s", counts[v], v))
		}
	}
	return strings.Join(parts, "+")
}

func (r *results) reportCPU(w *reportWriter) bool {
	c := r.cpu
	src := "perf stat -e task-clock"
	if !c.perf {
		src = "wait4 rusage utime+stime (perf stat cannot count here)"
	}
	n := len(c.direct["minimal"])
	w.printf("\n(f) CPU per call, whole process with its children, median of %d; CPU by %s; load average %s -> %s\n", n, src, c.loadBefore, c.loadAfter)
	tw := table(w)
	_, _ = fmt.Fprintln(tw, "call\tdelegate calls\ttask-clock\trusage\tcatena's share\tshare/minimal\tpeak RSS p50\tpeak RSS max\t")
	ok := true
	rows := c.rows()
	for _, row := range rows {
		share, rat := "", ""
		if row.catena {
			share, rat = fmt.Sprintf("%.2fms", row.share), fmt.Sprintf("%.2fx", row.ratio)
			ok = ok && row.ratio <= cpuTarget
		}
		clock := "-"
		if c.perf {
			clock = msf(row.clock)
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", row.name, row.calls, clock, msf(row.ru), share, rat, kb(row.rssMed), kb(row.rssM))
	}
	_ = tw.Flush()
	w.printf("catena's share: the call less, for each delegate call it made (from its event journal), the noop alone for that verb;\n")
	w.printf("share/minimal: over the minimal static Go binary. Target <= %.1fx for every catena call: %s\n", cpuTarget, verdict(ok))
	w.printf("rusage: wait4 utime+stime of the call run without perf; peak RSS: its VmHWM at exit, the process alone; catena binary %.1f MB\n",
		float64(c.binSize)/1e6)
	reportTraced(w, rows)
	for _, label := range []string{"catena", "traced", "alt"} {
		check, nr, found := checkAgainstNoRecord(rows, label)
		if !found {
			continue
		}
		met := check <= nr
		ok = ok && met
		w.printf("%s CHECK's share %.2fms against a DEL with no record %.2fms (%.2fx); target CHECK <= DEL with no record: %s\n",
			label, check, nr, check/nr, verdict(met))
	}
	return ok
}

// reportTraced prints, for each catena call, its share with a trace
// context against without: what carrying the context costs.
func reportTraced(w *reportWriter, rows []cpuRow) {
	shares := map[string]float64{}
	for _, row := range rows {
		shares[row.name] = row.share
	}
	var parts []string
	for _, row := range rows {
		verb, ok := strings.CutPrefix(row.name, "catena ")
		traced, found := shares["traced "+verb]
		if !ok || !found {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %+.3fms (%.2fx)", verb, traced-row.share, traced/row.share))
	}
	if len(parts) > 0 {
		w.printf("with a trace context (traced) against without (catena), catena's share: %s\n", strings.Join(parts, ", "))
	}
}

// checkAgainstNoRecord returns the shares (ms) of label's CHECK and of its
// DEL with no record, if both were measured.
func checkAgainstNoRecord(rows []cpuRow, label string) (check, noRecord float64, found bool) {
	var gotCheck, gotNR bool
	for _, row := range rows {
		switch row.name {
		case label + " CHECK":
			check, gotCheck = row.share, true
		case label + " DEL no record":
			noRecord, gotNR = row.share, true
		}
	}
	return check, noRecord, gotCheck && gotNR
}

func msf(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}
