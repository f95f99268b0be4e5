package main

import (
	"fmt"
	"time"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/libchain/events"
)

// floor is phase (d) for one verb of one phase: what catena's own event
// journal says of its successful operations in that phase's time window.
// Each Op carries the operation's duration inside catena and each delegate
// call's duration (from catena starting the delegate's process to reaping
// it): their sum is the physical floor, the time the delegates themselves
// need, which no meta-plugin can go below.
type floor struct {
	phase, verb string
	n           int
	floor       time.Duration // p50 of the per-operation sums of delegate calls
	inside      time.Duration // p50 of catena's own view of the operation
	own         time.Duration // p50 of inside - floor: catena's own work (lock, records, fsyncs)
	endToEnd    time.Duration // p50 seen by cnitool
	plain       time.Duration // p50 of the same verb as a plain conflist, seen by cnitool
}

// floors reads the journal of the catena variant for [start, end].
func (b *bench) floors(phase string, start, end time.Time, catena, plain latencies) ([]floor, error) {
	ops, _, err := events.Read(afero.NewOsFs(), b.catena.cache, start)
	if err != nil {
		return nil, fmt.Errorf("(d) %w", err)
	}
	var out []floor
	for _, verb := range []string{"ADD", "DEL"} {
		var sums, inside, own []time.Duration
		for _, op := range ops {
			if op.Verb != verb || op.Outcome != "ok" || op.Start.After(end) {
				continue
			}
			var sum time.Duration
			for _, c := range op.Calls {
				sum += c.Duration
			}
			sums, inside, own = append(sums, sum), append(inside, op.Duration), append(own, op.Duration-sum)
		}
		f := floor{phase: phase, verb: verb, n: len(sums), floor: median(sums), inside: median(inside), own: median(own)}
		f.endToEnd, f.plain = median(catena.add), median(plain.add)
		if verb == "DEL" {
			f.endToEnd, f.plain = median(catena.del), median(plain.del)
		}
		out = append(out, f)
	}
	return out, nil
}
