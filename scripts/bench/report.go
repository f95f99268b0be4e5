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
	floors  []floor
}

func table(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// report prints every table and returns whether all targets were met.
func (r *results) report(w io.Writer, conc int) bool {
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
	return ok
}

func (r *results) reportSeq(w io.Writer) bool {
	fmt.Fprintln(w, "\n(a) sequential ADD and DEL, cnitool, alternating")
	tw := table(w)
	fmt.Fprintln(tw, "variant\tverb\tp50\tp95\tn\t")
	for _, name := range []string{"catena", "plain"} {
		l := r.seq.by[name]
		for _, verb := range []string{"ADD", "DEL"} {
			s := summarize(l.add)
			if verb == "DEL" {
				s = summarize(l.del)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t\n", name, verb, ms(s.p50), ms(s.p95), s.n)
		}
	}
	_ = tw.Flush()
	c, p := r.seq.by["catena"], r.seq.by["plain"]
	add, del := ratio(median(c.add), median(p.add)), ratio(median(c.del), median(p.del))
	ok := add <= target && del <= target
	fmt.Fprintf(w, "ratio catena/plain (p50): ADD %.3f  DEL %.3f   target <= %.2f: %s\n", add, del, target, verdict(ok))
	return ok
}

func (r *results) reportConc(w io.Writer, conc int) bool {
	rounds := len(r.conc.add["catena"])
	fmt.Fprintf(w, "\n(b) %d ADDs at once, then %d DELs, cnitool, %d rounds per variant (wall: median round; node CPU: median of the rounds' busy time of the whole machine, all cores)\n", conc, conc, rounds)
	tw := table(w)
	fmt.Fprintln(tw, "variant\tverb\twall\tnode CPU\tp50\tp95\tmax\tn\t")
	for _, name := range []string{"catena", "plain"} {
		for _, verb := range []string{"ADD", "DEL"} {
			bs := r.conc.add[name]
			if verb == "DEL" {
				bs = r.conc.del[name]
			}
			s := summarize(all(bs))
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", name, verb, ms(median(walls(bs))), ms(median(busies(bs))), ms(s.p50), ms(s.p95), ms(s.max), s.n)
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
		fmt.Fprintf(w, "ratio catena/plain %s: wall %.3f  p50 %.3f  node CPU %.3f\n", verb, wall, p50, cpu)
	}
	fmt.Fprintf(w, "target: wall ratio <= %.2f: %s\n", target, verdict(ok))
	return ok
}

func (r *results) reportScale(w io.Writer) bool {
	fmt.Fprintln(w, "\n(c) catena with N records already in cacheDir, sequential, the counts in turn, cnitool")
	tw := table(w)
	fmt.Fprintln(tw, "records\tADD p50\tADD p95\tDEL p50\tDEL p95\tADD vs 0\tDEL vs 0\tpeak RSS catena\tpeak RSS incl. delegates\tseeding\t")
	base := r.scale[0]
	ok := true
	for _, lv := range r.scale {
		a, d := summarize(lv.lat.add), summarize(lv.lat.del)
		ra, rd := ratio(a.p50, median(base.lat.add)), ratio(d.p50, median(base.lat.del))
		ok = ok && ra <= flatTarget && rd <= flatTarget
		hwm, maxrss := peakRSS(lv.rss)
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%.3f\t%.3f\t%s\t%s\t%s\t\n", lv.records, ms(a.p50), ms(a.p95), ms(d.p50), ms(d.p95),
			ra, rd, kb(hwm), kb(maxrss), lv.seedTime.Round(1e6))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "flat: every p50 <= %.2f x that with 0 records: %s\n", flatTarget, verdict(ok))
	fmt.Fprintln(w, "peak RSS catena: VmHWM of the catena process at its exit (ptrace exit stop), max over its ADDs and DELs;")
	fmt.Fprintln(w, "incl. delegates: wait4 ru_maxrss of catena, the largest of catena and the delegates it reaped")
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

func (r *results) reportFloors(w io.Writer) {
	fmt.Fprintln(w, "\n(d) physical floor: the delegates' own exec times, from catena's event journal, same runs (p50)")
	tw := table(w)
	fmt.Fprintln(tw, "phase\tverb\tfloor\tcatena inside\tcatena own work\tcatena via cnitool\tplain via cnitool\tcatena/floor\tn\t")
	for _, f := range r.floors {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.3f\t%d\t\n", f.phase, f.verb, ms(f.floor), ms(f.inside), ms(f.own),
			ms(f.endToEnd), ms(f.plain), ratio(f.endToEnd, f.floor), f.n)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "floor: sum of the delegate calls of one operation, from catena starting each delegate to reaping it;")
	fmt.Fprintln(w, "for ADD that includes the wait for the durable 'starting' write that each delegate's start-up")
	fmt.Fprintln(w, "overlaps (gate.go), so under contention the floor absorbs part of catena's fsync cost. catena own")
	fmt.Fprintln(w, "work: its operation minus that sum (lock, record writes not overlapped, result conversion); via")
	fmt.Fprintln(w, "cnitool adds cnitool's and catena's own process start-up.")
}
