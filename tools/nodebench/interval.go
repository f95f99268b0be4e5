package nodebench

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// The interval of a ratio: rounds differ more than the variants may (a
// round's p50 moves by tens of percent with what else the node does), so
// the ratio of the pooled p50s is given with the 95% interval of a
// bootstrap over rounds: each resample draws, within each variant, as
// many rounds as it ran, with replacement, pools their samples and takes
// the ratio of the p50s. Pods of one round share its conditions, so the
// rounds, not the pods, are the draws.
const (
	resamples = 2000
	// seed makes the report reproducible from the same rounds
	seed = 1
)

// ratioInterval is the 95% bootstrap interval over rounds of the ratio
// Catena / primary of measure m's pooled p50 at n; false when either
// variant has fewer than two rounds that measured it.
func ratioInterval(rounds []Round, n int, m Measure) (lo, hi float64, ok bool, err error) {
	var per [2][]Dist
	for _, r := range rounds {
		if r.N != n {
			continue
		}
		if d := r.Dists[m.ID]; d.Count() > 0 {
			per[r.Variant] = append(per[r.Variant], d)
		}
	}
	if len(per[Primary]) < 2 || len(per[Catena]) < 2 {
		return 0, 0, false, nil
	}
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	p50Of := func(ds []Dist) (float64, error) {
		pick := make([]Dist, len(ds))
		for i := range pick {
			pick[i] = ds[rng.IntN(len(ds))]
		}
		all, err := Merge(pick...)
		if err != nil {
			return 0, err
		}
		q, _ := all.Quantile(0.5)
		return float64(q), nil
	}
	ratios := make([]float64, 0, resamples)
	for range resamples {
		c, err := p50Of(per[Catena])
		if err != nil {
			return 0, 0, false, fmt.Errorf("%s at N=%d: %w", m.Label, n, err)
		}
		p, err := p50Of(per[Primary])
		if err != nil {
			return 0, 0, false, fmt.Errorf("%s at N=%d: %w", m.Label, n, err)
		}
		if p > 0 {
			ratios = append(ratios, c/p)
		}
	}
	if len(ratios) == 0 {
		return 0, 0, false, nil
	}
	slices.Sort(ratios)
	at := func(q float64) float64 { return ratios[min(len(ratios)-1, int(q*float64(len(ratios))))] }
	return at(0.025), at(0.975), true, nil
}
