package reconcile

import (
	"context"
	"errors"
	"fmt"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain"
)

// reclaimDue is phase two: the records whose mark is at least grace old are
// reclaimed if a fresh ListPodSandbox still lacks them (and, if it lists
// nothing, their netns still proves them gone), their netns, looked at
// afresh, does not show them alive, their lock is taken without waiting
// and they are still the marked version. Anything else clears the mark,
// except the doubt of an empty list, which keeps it.
func (p *pass) reclaimDue(ctx context.Context) {
	if len(p.due) == 0 {
		return
	}
	fresh, err := listWithin(ctx, p.Runtime, p.runtimeTimeout())
	if err != nil {
		p.rep.RuntimeError = err.Error()
		p.keepAll("runtime error: " + err.Error())
		for _, rec := range p.due {
			p.rep.Kept++
			p.rep.decide(rec.Key, ActKept, p.keep)
		}
		return
	}
	p.procs = nil // the netns are looked at afresh too
	for _, rec := range p.due {
		key, m := rec.Key, p.marks[rec.Key]
		if _, ok := fresh[key.ContainerID]; ok {
			p.notCandidate(key, ActLeft, "listed by the fresh ListPodSandbox")
			continue
		}
		ev, ok := p.netnsAllows(rec, len(fresh) == 0, ActLeft)
		if !ok {
			continue
		}
		proof := ""
		if ev.Verdict == NSDead {
			proof = "; " + ev.Why
		}
		if p.Opts.DryRun {
			p.rep.decide(key, ActWouldReclaim, fmt.Sprintf("marked at %s, no sandbox since", m.MarkedAt.Format("2006-01-02T15:04:05Z07:00"))+proof)
			continue
		}
		res, err := p.Engine.Reclaim(ctx, key, libchain.ReclaimOptions{
			Verb: "RECLAIM", Path: p.Opts.CNIPath, DelegateTimeout: p.Opts.DelegateTimeout,
			AbandonAfter: p.Opts.AbandonAfter,
			Verify: func(cur *cache.Record) error {
				if v := Version(cur); v != m.Version {
					return fmt.Errorf("changed since its mark (version %s, marked %s)", v, m.Version)
				}
				return nil
			},
		})
		p.rep.Abandoned += len(res.Abandoned)
		p.clearMark(key)
		switch {
		case err == nil:
			p.rep.Reclaimed++
			p.rep.Decisions = append(p.rep.Decisions, Decision{Key: key, Action: ActReclaimed, Abandoned: res.Abandoned,
				Reason: "no sandbox since its mark at " + m.MarkedAt.Format("2006-01-02T15:04:05Z07:00") + proof})
			p.log().Info("reconcile: reclaimed an attachment the runtime no longer knows", "attachment", key.String(), "markedAt", m.MarkedAt)
		case errors.Is(err, libchain.ErrNotReclaimed):
			p.rep.decide(key, ActLeft, err.Error())
		default:
			// The record now needs teardown: the retry takes it from here.
			p.rep.Errors = append(p.rep.Errors, err.Error())
			p.rep.decide(key, ActFailed, err.Error())
			p.log().Warn("reconcile: reclaim failed; the record keeps what is held and is retried", "attachment", key.String(), "error", err)
		}
	}
}

// clearStaleMarks removes the marks whose record is gone or no longer a
// candidate this pass: marks are only ever kept for waiting candidates.
func (p *pass) clearStaleMarks() {
	if len(p.marks) == 0 {
		return
	}
	waiting := make(map[cache.Key]bool, len(p.marks))
	for _, d := range p.rep.Decisions {
		switch d.Action {
		case ActMarked, ActWaiting, ActKept:
			waiting[d.Key] = true
		}
	}
	for key := range p.marks {
		if !waiting[key] {
			p.clearMark(key)
		}
	}
}

// countHeld sets the held figures from the records read, less those the
// pass's retries released: what is still held after the pass.
func (p *pass) countHeld(released map[cache.Key]bool) {
	for _, rec := range p.recs {
		if rec.Phase == cache.PhaseNeedsTeardown && !released[rec.Key] {
			p.rep.Held++
			p.rep.OldestHeld = max(p.rep.OldestHeld, p.now.Sub(heldSince(rec)))
		}
	}
}
