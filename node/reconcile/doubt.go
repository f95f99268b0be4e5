package reconcile

import "github.com/catena-cni/catena/cache"

// emptyList is why an empty sandbox list keeps a record.
const emptyList = "the runtime listed no sandboxes"

// netnsAllows judges the netns of rec, which the runtime does not list,
// and reports whether rec may be (or stay) a candidate. Not if its netns
// shows its sandbox alive: decided as alive (its mark is cleared); nor, if
// the runtime listed no sandboxes at all, unless its netns proves its
// sandbox gone (NSDead: its path gone, or another namespace there; a
// namespace still pinned there with no process in it is no proof): kept,
// with its mark, for a pass that can decide.
func (p *pass) netnsAllows(rec *cache.Record, empty bool, alive Action) (Evidence, bool) {
	ev := p.evidence(rec)
	switch {
	case ev.Verdict == NSAlive:
		p.notCandidate(rec.Key, alive, "not listed by the runtime, but "+ev.Why)
		return ev, false
	case empty && ev.Verdict != NSDead:
		p.rep.EmptyList = true
		p.rep.Kept++
		if p.rep.KeptCause == "" {
			p.rep.KeptCause = emptyList
		}
		p.rep.decide(rec.Key, ActKept, emptyList+", and nothing proves its sandbox gone: "+ev.Why)
		return ev, false
	}
	return ev, true
}

// evidence judges rec's netns, looking at the node's processes once per
// phase (p.procs is reset when phase two lists the runtime afresh).
func (p *pass) evidence(rec *cache.Record) Evidence {
	if p.NetNS == nil {
		return Evidence{NSUnknown, "no netns observer"}
	}
	if p.procs == nil {
		procs, err := p.NetNS.Scan()
		if err != nil {
			p.rep.Errors = append(p.rep.Errors, err.Error())
			if procs.Incomplete == "" {
				procs.Incomplete = err.Error()
			}
		}
		p.procs = &procs
	}
	return judge(p.NetNS, *p.procs, rec)
}
