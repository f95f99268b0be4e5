package libchain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/catena-cni/catena/cache"
)

// bury writes the tombstone of rec, which a teardown no runtime's DEL
// asked for has just completed, before the record goes (cache.Tombstones):
// the runtime may still hold the ADD's result and DEL the key with it,
// and that DEL must then invoke nothing. A store without tombstones
// buries nothing.
func (e *Engine) bury(ctx context.Context, rec *cache.Record) error {
	ts, ok := e.Store.(cache.Tombstones)
	if !ok {
		return nil
	}
	held, _ := recordIPs(rec)
	ips := make([]string, 0, len(held))
	for ip := range held {
		ips = append(ips, ip)
	}
	slices.Sort(ips)
	t := cache.Tombstone{Key: rec.Key, Released: e.now().UTC(), By: traceOf(ctx).verb(), IPs: ips}
	return e.durably(ctx, "before-bury", "after-bury", func() error { return ts.Bury(t) })
}

// delTombstoned is a DEL with no record of a key that has a tombstone: it
// invokes nothing, clears the tombstone (the runtime forgets its result
// once this DEL succeeds), journals it and reports true. A tombstone that
// cannot be read is doubt: nothing is invoked either, and it is left for
// the operator. False: no tombstone, or a store without them.
func (e *Engine) delTombstoned(ctx context.Context, key cache.Key) bool {
	ts, ok := e.Store.(cache.Tombstones)
	if !ok {
		return false
	}
	t, err := ts.TombstoneOf(key)
	switch {
	case errors.Is(err, cache.ErrNotFound):
		return false
	case err != nil:
		e.log().Error("DEL found no record and a tombstone that cannot be read: invoking nothing",
			"attachment", key.String(), "error", err)
		traceOf(ctx).released(OpRelease{Outcome: ReleaseKept, Reason: BoundText("tombstone unreadable: " + err.Error())})
		return true
	}
	reason := fmt.Sprintf("torn down by %s at %s", t.By, t.Released.Format("2006-01-02T15:04:05.000Z07:00"))
	e.log().Info("DEL found no record: already torn down, invoking nothing", "attachment", key.String(), "tornDown", reason)
	traceOf(ctx).released(OpRelease{Outcome: ReleaseTombstone, Reason: reason})
	if err := e.durably(ctx, "before-unbury", "after-unbury", func() error { return ts.Unbury(key) }); err != nil {
		e.log().Warn("clearing the tombstone failed; it is pruned by age", "attachment", key.String(), "error", err)
	}
	return true
}

// pruneTombstones bounds network's tombstones that no runtime's DEL came
// to clear (cache.TombstoneMaxAge, cache.TombstoneMaxCount); GC and the
// retry pass of that network call it.
func (e *Engine) pruneTombstones(network string) {
	ts, ok := e.Store.(cache.Tombstones)
	if !ok {
		return
	}
	pruned, err := ts.PruneTombstones(network, e.now(), cache.TombstoneMaxAge, cache.TombstoneMaxCount)
	if err != nil {
		e.log().Warn("pruning tombstones", "network", network, "error", err)
	}
	if len(pruned) > 0 {
		e.log().Info("pruned tombstones", "network", network, "count", len(pruned))
	}
}

// recordIPs returns the addresses rec's results name (its final result,
// each step's, its prevResult) and whether those are all it may hold:
// false when a step's ADD is under way or its outcome unknown (starting,
// unknown, add-failed) and no result names an address.
func recordIPs(rec *cache.Record) (map[string]bool, bool) {
	ips := map[string]bool{}
	add := func(raw json.RawMessage) {
		got, err := resultIPs(raw)
		if err == nil {
			for ip := range got {
				ips[ip] = true
			}
		}
	}
	add(rec.Result)
	add(rec.PrevResult)
	uncertain := false
	for _, s := range rec.Steps {
		add(s.Result)
		switch s.State {
		case cache.StepStarting, cache.StepUnknown, cache.StepAddFailed:
			uncertain = true
		}
	}
	return ips, len(ips) > 0 || !uncertain
}

// resultIPs returns the addresses (without prefix) a result of any
// version names; an empty raw names none.
func resultIPs(raw []byte) (map[string]bool, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	r, err := decodeResult(raw)
	if err != nil {
		return nil, err
	}
	conv, err := r.GetAsVersion(types100.ImplementedSpecVersion)
	if err != nil {
		return nil, fmt.Errorf("converting result from %s: %w", r.Version(), err)
	}
	res, ok := conv.(*types100.Result)
	if !ok {
		return nil, fmt.Errorf("result of version %s is not a %s result", r.Version(), types100.ImplementedSpecVersion)
	}
	ips := map[string]bool{}
	for _, c := range res.IPs {
		if c != nil && c.Address.IP != nil {
			ips[c.Address.IP.String()] = true
		}
	}
	return ips, nil
}
