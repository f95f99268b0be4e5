package main

import (
	"fmt"
	"io"
	"text/tabwriter"
)

const (
	// target is the largest acceptable catena/plain ratio in (a) and (b).
	target = 1.10
	// flatTarget is the largest acceptable ratio of a scale level's median
	// to that with no records: "flat within noise".
	flatTarget = 1.20
)

// results gathers what the phases measured; a phase that did not run is nil.
type results struct {
	seq     *seqResult
	conc    *concResult
	scale   []*scaleLevel
	pending []*pendingLevel
	cpu     *cpuResult
	check   *checkResult
	floors  []floor
}

// reportWriter is where the report goes: it keeps the first write error,
// after which it writes nothing more, and report returns that error.
type reportWriter struct {
	w   io.Writer
	err error
}

func (rw *reportWriter) Write(b []byte) (int, error) {
	if rw.err != nil {
		return 0, rw.err
	}
	n, err := rw.w.Write(b)
	rw.err = err
	return n, err
}

// printf and println write to rw, which keeps their error.
func (rw *reportWriter) printf(format string, args ...any) { _, _ = fmt.Fprintf(rw, format, args...) }
func (rw *reportWriter) println(args ...any)               { _, _ = fmt.Fprintln(rw, args...) }

// table writes aligned columns to rw; a write error reaches rw, which keeps
// it, so a table's rows and its Flush are not checked one by one.
func table(rw *reportWriter) *tabwriter.Writer {
	return tabwriter.NewWriter(rw, 0, 0, 2, ' ', tabwriter.AlignRight)
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// report prints every table to out and returns whether all targets were
// met, and the error of a write to out.
func (r *results) report(out io.Writer, conc int) (bool, error) {
	w := &reportWriter{w: out}
	ok := true
	if r.seq != nil {
		ok = r.reportSeq(w) && ok
	}
	if r.conc != nil {
		ok = r.reportConc(w, conc) && ok
	}
	if r.scale != nil {
		ok = r.reportScale(w) && ok
	}
	if r.pending != nil {
		ok = r.reportPending(w) && ok
	}
	if r.floors != nil {
		r.reportFloors(w)
	}
	if r.cpu != nil {
		ok = r.reportCPU(w) && ok
	}
	if r.check != nil {
		ok = r.reportCheck(w) && ok
	}
	if w.err != nil {
		return ok, fmt.Errorf("writing the report: %w", w.err)
	}
	return ok, nil
}

func (r *results) reportSeq(w *reportWriter) bool {
	w.println("\n(a) sequential ADD and DEL, cnitool, alternating")
	tw := table(w)
	_, _ = fmt.Fprintln(tw, "variant\tverb\tp50\tp95\tn\t")
	for _, name := range []string{"catena", "plain"} {
		l := r.seq.by[name]
		for _, verb := range []string{"ADD", "DEL"} {
			s := summarize(l.add)
			if verb == "DEL" {
				s = summarize(l.del)
			}
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t\n", name, verb, ms(s.p50), ms(s.p95), s.n)
		}
	}
	_ = tw.Flush()
	c, p := r.seq.by["catena"], r.seq.by["plain"]
	add, del := ratio(median(c.add), median(p.add)), ratio(median(c.del), median(p.del))
	ok := add <= target && del <= target
	w.printf("ratio catena/plain (p50): ADD %.3f  DEL %.3f   target <= %.2f: %s\n", add, del, target, verdict(ok))
	return ok
}

func (r *results) reportConc(w *reportWriter, conc int) bool {
	rounds := len(r.conc.add["catena"])
	w.printf("\n(b) %d ADDs at once, then %d DELs, cnitool, %d rounds per variant (wall: median round; node CPU: median of the rounds' busy time of the whole machine, all cores)\n", conc, conc, rounds)
	tw := table(w)
	_, _ = fmt.Fprintln(tw, "variant\tverb\twall\tnode CPU\tp50\tp95\tmax\tn\t")
	for _, name := range []string{"catena", "plain"} {
		for _, verb := range []string{"ADD", "DEL"} {
			bs := r.conc.add[name]
			if verb == "DEL" {
				bs = r.conc.del[name]
			}
			s := summarize(all(bs))
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", name, verb, ms(median(walls(bs))), ms(median(busies(bs))), ms(s.p50), ms(s.p95), ms(s.max), s.n)
		}
	}
	_ = tw.Flush()
	ok := true
	for _, verb := range []string{"ADD", "DEL"} {
		c, p := r.conc.add["catena"], r.conc.add["plain"]
		if verb == "DEL" {
			c, p = r.conc.del["catena"], r.conc.del["plain"]
		}
		wall := ratio(median(walls(c)), median(walls(p)))
		p50 := ratio(median(all(c)), median(all(p)))
		cpu := ratio(median(busies(c)), median(busies(p)))
		ok = ok && wall <= target
		w.printf("ratio catena/plain %s: wall %.3f  p50 %.3f  node CPU %.3f\n", verb, wall, p50, cpu)
	}
	w.printf("target: wall ratio <= %.2f: %s\n", target, verdict(ok))
	return ok
}

func (r *results) reportScale(w *reportWriter) bool {
	w.println("\n(c) catena with N records already in cacheDir, sequential, the counts in turn, cnitool")
	tw := table(w)
	_, _ = fmt.Fprintln(tw, "records\tADD p50\tADD p95\tDEL p50\tDEL p95\tADD vs 0\tDEL vs 0\tpeak RSS catena\tpeak RSS incl. delegates\tseeding\t")
	base := r.scale[0]
	ok := true
	for _, lv := range r.scale {
		a, d := summarize(lv.lat.add), summarize(lv.lat.del)
		ra, rd := ratio(a.p50, median(base.lat.add)), ratio(d.p50, median(base.lat.del))
		ok = ok && ra <= flatTarget && rd <= flatTarget
		hwm, maxrss := peakRSS(lv.rss)
		_, _ = fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%.3f\t%.3f\t%s\t%s\t%s\t\n", lv.records, ms(a.p50), ms(a.p95), ms(d.p50), ms(d.p95),
			ra, rd, kb(hwm), kb(maxrss), lv.seedTime.Round(1e6))
	}
	_ = tw.Flush()
	w.printf("flat: every p50 <= %.2f x that with 0 records: %s\n", flatTarget, verdict(ok))
	w.println("peak RSS catena: VmHWM of the catena process at its exit (ptrace exit stop), max over its ADDs and DELs;")
	w.println("incl. delegates: wait4 ru_maxrss of catena, the largest of catena and the delegates it reaped")
	return ok
}

func peakRSS(ss []rssSample) (hwm, maxrss int64) {
	for _, s := range ss {
		hwm, maxrss = max(hwm, s.hwmKB), max(maxrss, s.maxrssK)
	}
	return hwm, maxrss
}

func kb(v int64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fMiB", float64(v)/1024)
}

func (r *results) reportFloors(w *reportWriter) {
	w.println("\n(d) physical floor: the delegates' own exec times, from catena's event journal, same runs (p50)")
	tw := table(w)
	_, _ = fmt.Fprintln(tw, "phase\tverb\tfloor\tcatena inside\tcatena own work\tcatena via cnitool\tplain via cnitool\tcatena/floor\tn\t")
	for _, f := range r.floors {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.3f\t%d\t\n", f.phase, f.verb, ms(f.floor), ms(f.inside), ms(f.own),
			ms(f.endToEnd), ms(f.plain), ratio(f.endToEnd, f.floor), f.n)
	}
	_ = tw.Flush()
	w.println("floor: sum of the delegate calls of one operation, from catena starting each delegate to reaping it;")
	w.println("for ADD that includes the wait for the durable 'starting' write that each delegate's start-up")
	w.println("overlaps (gate.go), so under contention the floor absorbs part of catena's fsync cost. catena own")
	w.println("work: its operation minus that sum (lock, record writes not overlapped, result conversion); via")
	w.println("cnitool adds cnitool's and catena's own process start-up.")
}
