package leaks

import (
	"fmt"
	"slices"
	"time"
)

// DefaultConfirmAfter is how far apart the reports a release needs must
// be: a leak seen twice that long apart is not an ADD in flight.
const DefaultConfirmAfter = 15 * time.Minute

// Refusal is a finding of the reports that is not released, and why.
type Refusal struct {
	Finding Finding `json:"finding"`
	Why     string  `json:"why"`
}

// Confirm is what reports agree on, checked against now, a fresh scan of
// the node: the leaks present in every report and in now, the same thing
// with the same owner; and, refused with the reason, every other leak of
// the reports. It fails outright when a report cannot be trusted for this
// node: another node or boot, fewer than two reports, or reports closer
// than confirmAfter.
func Confirm(reports []*Report, now *Report, confirmAfter time.Duration) ([]Finding, []Refusal, error) {
	if len(reports) < 2 {
		return nil, nil, fmt.Errorf("%d report(s): a release needs two at least, %s apart", len(reports), confirmAfter)
	}
	times := make([]time.Time, len(reports))
	for i, r := range reports {
		switch {
		case r.Node != now.Node:
			return nil, nil, fmt.Errorf("report %d is of node %q, this is %q", i+1, r.Node, now.Node)
		case r.BootID != now.BootID:
			return nil, nil, fmt.Errorf("report %d is of another boot (%s; this one is %s): every namespace and process it saw is gone", i+1, r.BootID, now.BootID)
		case r.Time.After(now.Time):
			return nil, nil, fmt.Errorf("report %d is from the future (%s, now %s)", i+1, r.Time.Format(time.RFC3339), now.Time.Format(time.RFC3339))
		}
		times[i] = r.Time
	}
	first, last := slices.MinFunc(times, time.Time.Compare), slices.MaxFunc(times, time.Time.Compare)
	if gap := last.Sub(first); gap < confirmAfter {
		return nil, nil, fmt.Errorf("the reports are %s apart, less than %s: run the report again later", gap.Round(time.Second), confirmAfter)
	}
	leaksOf := func(r *Report) map[string]Finding {
		m := map[string]Finding{}
		for _, f := range r.Leaks() {
			m[f.Key()] = f
		}
		return m
	}
	current := leaksOf(now)
	all := make([]map[string]Finding, len(reports))
	for i, r := range reports {
		all[i] = leaksOf(r)
	}
	var keys []string
	seen := map[string]bool{}
	for _, m := range all {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	var release []Finding
	var refused []Refusal
	for _, k := range keys {
		var f Finding
		in := 0
		for _, m := range all {
			if g, ok := m[k]; ok {
				f = g
				in++
			}
		}
		cur, still := current[k]
		switch {
		case in < len(all):
			refused = append(refused, Refusal{Finding: f, Why: fmt.Sprintf("a leak in %d of the %d reports only", in, len(all))})
		case !still:
			refused = append(refused, Refusal{Finding: f, Why: "not a leak now: " + whyNow(now, k)})
		case cur.Owner != f.Owner || cur.Delegate == nil || f.Delegate == nil || *cur.Delegate != *f.Delegate:
			refused = append(refused, Refusal{Finding: f, Why: "its owner or delegate changed since the reports"})
		case cur.CachedConfig != f.CachedConfig:
			refused = append(refused, Refusal{Finding: f, Why: "the config it is released with changed since the reports (its libcni cache entry " +
				orNone(f.CachedConfig) + ", now " + orNone(cur.CachedConfig) + ")"})
		default:
			release = append(release, cur)
		}
	}
	return release, refused, nil
}

// whyNow is what the fresh scan says of the finding k.
func whyNow(now *Report, k string) string {
	for _, f := range now.Findings {
		if f.Key() == k {
			return f.Why
		}
	}
	return "gone"
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
