package main

import (
	"fmt"
	"time"
)

// stat summarizes samples: wall and CPU, p50 and p99 (nearest rank: below
// 100 samples, p99 is the largest).
type stat struct {
	wallP50, wallP99, cpuP50, cpuP99 time.Duration
	n                                int
}

func statOf(ss []sample) stat {
	w, c := wallsOf(ss), cpusOf(ss)
	return stat{wallP50: median(w), wallP99: percentile(w, 99), cpuP50: median(c), cpuP99: percentile(c, 99), n: len(ss)}
}

func wallsOf(ss []sample) []time.Duration {
	return durationsOf(ss, func(s sample) time.Duration { return s.wall })
}

func cpusOf(ss []sample) []time.Duration {
	return durationsOf(ss, func(s sample) time.Duration { return s.cpu })
}

// pairwise combines a[i] and b[i] by op, as far as both go.
func pairwise(a, b []sample, op func(x, y time.Duration) time.Duration) []sample {
	out := make([]sample, min(len(a), len(b)))
	for i := range out {
		out[i] = sample{wall: op(a[i].wall, b[i].wall), cpu: op(a[i].cpu, b[i].cpu)}
	}
	return out
}

func plus(x, y time.Duration) time.Duration  { return x + y }
func minus(x, y time.Duration) time.Duration { return x - y }

// pooled is every call of the bursts, as samples.
func pooled(bs []burst) []sample {
	var out []sample
	for _, b := range bs {
		for i := range b.each {
			s := sample{wall: b.each[i]}
			if i < len(b.cpu) {
				s.cpu = b.cpu[i]
			}
			out = append(out, s)
		}
	}
	return out
}

// chained is the bursts a[r] then b[r] of each round as one: an
// attachment's ADD and CHECK as one call, the rounds' walls and node CPU
// added.
func chained(a, b []burst) []burst {
	out := make([]burst, min(len(a), len(b)))
	for r := range out {
		sa, sb := pooled(a[r:r+1]), pooled(b[r:r+1])
		sum := pairwise(sa, sb, plus)
		out[r] = burst{wall: a[r].wall + b[r].wall, busy: a[r].busy + b[r].busy, each: wallsOf(sum), cpu: cpusOf(sum)}
	}
	return out
}

// checkOwn is CHECK's own cost beside a DEL with no record, in wall time
// and in CPU, at p50; met: at most that (the target, sequentially).
type checkOwn struct {
	ownWall, ownCPU, nrWall, nrCPU time.Duration
}

func (c checkOwn) met() bool { return c.ownWall <= c.nrWall && c.ownCPU <= c.nrCPU }

// seqOwn: the catena CHECK less the plain CHECK of the same iteration.
func (c *checkResult) seqOwn() (own, nr stat, v checkOwn) {
	own = statOf(pairwise(c.check["catena"], c.check["plain"], minus))
	nr = statOf(c.delNoRecord)
	return own, nr, checkOwn{ownWall: own.wallP50, ownCPU: own.cpuP50, nrWall: nr.wallP50, nrCPU: nr.cpuP50}
}

// burstOwn: wall, the catena CHECK burst less the plain one of the same
// round (median over rounds) against the DEL bursts' median; CPU, the
// calls' median CPU, catena's less plain's, against the DELs'.
func (c *checkResult) burstOwn() checkOwn {
	var d []time.Duration
	cat, pl := c.burstCheck["catena"], c.burstCheck["plain"]
	for r := range min(len(cat), len(pl)) {
		d = append(d, cat[r].wall-pl[r].wall)
	}
	return checkOwn{
		ownWall: median(d), nrWall: median(walls(c.burstDelNoRecord)),
		ownCPU: median(cpusOf(pooled(cat))) - median(cpusOf(pooled(pl))), nrCPU: median(cpusOf(pooled(c.burstDelNoRecord))),
	}
}

func (r *results) reportCheck(w *reportWriter) bool {
	c := r.check
	w.printf("\n(g) ADD then CHECK, as CRI-O starts a pod: cnitool, one attachment at a time, the variants alternating; load average %s -> %s\n",
		c.loadBefore, c.loadAfter)
	w.println("    DEL with no record: catena alone, exec'd by the bench with libcni's stdin, for an attachment never added; CPU: utime+stime of the call and its children")
	tw := table(w)
	_, _ = fmt.Fprintln(tw, "variant\tcall\twall p50\twall p99\tCPU p50\tCPU p99\tn\t")
	row := func(variant, call string, s stat) {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", variant, call, ms(s.wallP50), ms(s.wallP99), ms(s.cpuP50), ms(s.cpuP99), s.n)
	}
	for _, name := range []string{"catena", "plain"} {
		row(name, "ADD", statOf(c.add[name]))
		row(name, "CHECK", statOf(c.check[name]))
		row(name, "ADD+CHECK", statOf(pairwise(c.add[name], c.check[name], plus)))
	}
	own, nr, v := c.seqOwn()
	row("catena", "DEL, no record", nr)
	row("catena-plain", "CHECK's own", own)
	_ = tw.Flush()
	ca, pa := statOf(pairwise(c.add["catena"], c.check["catena"], plus)), statOf(pairwise(c.add["plain"], c.check["plain"], plus))
	cc, pc := statOf(c.check["catena"]), statOf(c.check["plain"])
	w.printf("ratio catena/plain: ADD+CHECK wall p50 %.3f  p99 %.3f  CPU p50 %.3f;  CHECK wall p50 %.3f  p99 %.3f  CPU p50 %.3f\n",
		ratio(ca.wallP50, pa.wallP50), ratio(ca.wallP99, pa.wallP99), ratio(ca.cpuP50, pa.cpuP50),
		ratio(cc.wallP50, pc.wallP50), ratio(cc.wallP99, pc.wallP99), ratio(cc.cpuP50, pc.cpuP50))
	w.println("CHECK's own: the catena CHECK less the plain CHECK of the same iteration (the same three delegate CHECKs run in both)")
	w.printf("target: CHECK's own cost <= a DEL with no record, p50: wall %s <= %s, CPU %s <= %s: %s\n",
		ms(v.ownWall), ms(v.nrWall), ms(v.ownCPU), ms(v.nrCPU), verdict(v.met()))
	r.reportCheckBursts(w)
	return v.met()
}

// reportCheckBursts prints the bursts. CHECK's own cost in a burst is set
// beside a burst of DELs with no record for information only, not as the
// target: the DELs' burst runs no delegate, so it does not contend for the
// CPU as a burst of the chain does, and the same call costs more CPU in
// the chain's burst.
func (r *results) reportCheckBursts(w *reportWriter) {
	c := r.check
	w.printf("\n(g) %d ADDs at once, then %d CHECKs, cnitool, %d rounds per variant; bursts of %d DELs with no record (wall: median round; node CPU: median round's busy time, all cores; CPU/call: p50 of the calls')\n",
		c.conc, c.conc, len(c.burstCheck["catena"]), c.conc)
	tw := table(w)
	_, _ = fmt.Fprintln(tw, "variant\tcall\twall\tnode CPU\tp50\tp99\tmax\tCPU/call\tn\t")
	row := func(variant, call string, bs []burst) {
		s := pooled(bs)
		lat := wallsOf(s)
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", variant, call, ms(median(walls(bs))), ms(median(busies(bs))),
			ms(median(lat)), ms(percentile(lat, 99)), ms(maxOf(lat)), ms(median(cpusOf(s))), len(s))
	}
	for _, name := range []string{"catena", "plain"} {
		row(name, "ADD", c.burstAdd[name])
		row(name, "CHECK", c.burstCheck[name])
		row(name, "ADD+CHECK", chained(c.burstAdd[name], c.burstCheck[name]))
	}
	row("catena", "DEL, no record", c.burstDelNoRecord)
	_ = tw.Flush()
	for _, verb := range []string{"ADD+CHECK", "CHECK"} {
		cat, pl := c.burstCheck["catena"], c.burstCheck["plain"]
		if verb == "ADD+CHECK" {
			cat, pl = chained(c.burstAdd["catena"], cat), chained(c.burstAdd["plain"], pl)
		}
		cl, pll := wallsOf(pooled(cat)), wallsOf(pooled(pl))
		w.printf("ratio catena/plain %s: wall %.3f  p50 %.3f  p99 %.3f  node CPU %.3f  CPU/call %.3f\n", verb,
			ratio(median(walls(cat)), median(walls(pl))), ratio(median(cl), median(pll)), ratio(percentile(cl, 99), percentile(pll, 99)),
			ratio(median(busies(cat)), median(busies(pl))), ratio(median(cpusOf(pooled(cat))), median(cpusOf(pooled(pl)))))
	}
	v := c.burstOwn()
	w.printf("CHECK's own: burst wall %s (the catena CHECK burst less the plain one of the same round), CPU/call %s (the p50s' difference);\n",
		ms(v.ownWall), ms(v.ownCPU))
	w.printf("a burst of DELs with no record: wall %s, CPU/call %s (for information: that burst runs no delegate, so it contends less for the CPU)\n",
		ms(v.nrWall), ms(v.nrCPU))
}
