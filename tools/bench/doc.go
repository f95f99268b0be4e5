// Command bench measures what catena costs on a real chain: the same three
// delegates (bridge + host-local, portmap with one port mapping, tuning)
// driven by bin/cnitool, either as
//
//	catena: a conflist whose single entry is catena wrapping the delegates
//	plain:  a conflist listing the three plugins directly
//
// Phases (-phases; flags size each, see -h):
//
//	(a) seq:   ADD then DEL, one attachment at a time, the variants
//	           alternating; p50, p95, catena/plain ratio
//	(b) conc:  -conc ADDs at once, then as many DELs, both variants,
//	           alternating rounds; wall, p50, p95, max, ratio
//	(c) scale: catena's ADD and DEL with 0, 1,000 and 10,000 records already
//	           in its cacheDir; and catena's peak RSS (rss.go)
//	(d) the physical floor of (a) and (b): the delegates' own exec times,
//	    from catena's event journal (floor.go)
//	(e) pending: catena's ADD and DEL with 0, 1, 10 and 100 hung pending
//	    teardowns on its network (pending.go), beside the plain ADD
//	(f) cpu: catena's own CPU per call (task-clock of the whole call with
//	    its children) over three no-op delegates, beside a minimal Go
//	    binary and the no-op alone, for every verb, and CHECK's share beside
//	    that of a DEL with no record (cpu.go); no cnitool
//	(g) check: ADD then CHECK, as CRI-O starts a pod, catena against plain,
//	    sequential (-check-n) and in bursts (-conc, -conc-rounds); wall and
//	    CPU (utime+stime of the call and its children), p50, p99, ratios;
//	    and CHECK's own cost (catena's CHECK less plain's) against a catena
//	    DEL with no record, which runs no delegate (check.go)
//
// It prints the tables, and writes a latency CDF plot (-plot, and with
// -docs docs/bench.png for docs/performance.md). Every netns is created and deleted
// outside the timed region.
//
// Run as root from the repository root after `make plugins build`, or with
// `make bench`. Everything it writes lives in one temp dir, except what the
// plugins and cnitool themselves write (links, iptables rules, libcni's
// result cache), which the DELs and the final cleanup remove.
//
// Files:
//
//	doc.go         this comment
//	main.go        main: the options, the phases in turn, the report and the plot
//	options.go     the flags and their defaults
//	env.go         the bench's temp dir, the two variants' conflists, the netns, the cleanup
//	cnitool.go     one cnitool call, timed, with its CPU
//	sequential.go  phase (a) seq
//	concurrent.go  phase (b) conc
//	scale.go       phase (c) scale
//	rss.go         catena's peak RSS, by a recorder that runs it under ptrace
//	floor.go       phase (d): the delegates' own times, from catena's event journal
//	pending.go     phase (e) pending
//	cpu.go         phase (f) cpu
//	check.go       phase (g) check
//	checkreport.go phase (g)'s figures and tables
//	procstat.go    the machine's busy CPU time, from /proc/stat (nodebench.CPUTimes)
//	stats.go       summaries of latencies: percentiles, ratios
//	report.go      the tables and whether every target was met
//	plot.go        the latency CDF plot (drawn by tools/benchplot)
package main
