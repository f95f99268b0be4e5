package nodebench

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Dist is one measure's values in a round or over rounds: the samples
// measured, or what a Prometheus histogram observed meanwhile (only its
// buckets are known).
type Dist struct {
	samples []time.Duration
	hist    *Hist
}

// Count is how many values the Dist holds.
func (d Dist) Count() int {
	if d.hist != nil {
		return int(math.Round(d.hist.Count()))
	}
	return len(d.samples)
}

// Quantile is the q-quantile (0 < q <= 1) of the samples by nearest rank,
// or of the histogram as Prometheus's histogram_quantile interpolates it;
// false when the Dist is empty.
func (d Dist) Quantile(q float64) (time.Duration, bool) {
	if d.hist != nil {
		s, ok := d.hist.quantile(q)
		return time.Duration(s * float64(time.Second)), ok
	}
	return nearestRank(d.samples, q)
}

// nearestRank is the value of rank ceil(q*n) of the sorted samples.
func nearestRank(ds []time.Duration, q float64) (time.Duration, bool) {
	if len(ds) == 0 {
		return 0, false
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(q * float64(len(s))))
	rank = max(1, min(rank, len(s)))
	return s[rank-1], true
}

// Merge is the Dists together: their samples, or their histograms
// added, which must have the same buckets; a Dist of neither kind is
// empty and adds nothing.
func Merge(ds ...Dist) (Dist, error) {
	var out Dist
	for _, d := range ds {
		switch {
		case d.hist == nil && len(d.samples) == 0:
		case (d.hist == nil) != (out.hist == nil) && (out.hist != nil || len(out.samples) > 0):
			return Dist{}, errors.New("merge: samples and a histogram")
		case d.hist == nil:
			out.samples = append(out.samples, d.samples...)
		case out.hist == nil:
			h := d.hist.clone()
			out.hist = &h
		default:
			if err := out.hist.add(*d.hist); err != nil {
				return Dist{}, err
			}
		}
	}
	return out, nil
}

// Hist is a histogram's buckets: the cumulative count at each upper bound,
// in seconds, the last +Inf.
type Hist struct {
	bounds     []float64
	cumulative []float64
}

// Count is how many observations the histogram holds.
func (h Hist) Count() float64 {
	if len(h.cumulative) == 0 {
		return 0
	}
	return h.cumulative[len(h.cumulative)-1]
}

func (h Hist) clone() Hist {
	return Hist{bounds: slices.Clone(h.bounds), cumulative: slices.Clone(h.cumulative)}
}

func (h *Hist) add(o Hist) error {
	if !slices.Equal(h.bounds, o.bounds) {
		return fmt.Errorf("merge: buckets %v and %v differ", h.bounds, o.bounds)
	}
	for i := range h.cumulative {
		h.cumulative[i] += o.cumulative[i]
	}
	return nil
}

// quantile is the q-quantile in seconds as histogram_quantile computes
// it: the bucket holding rank q*count, and a linear interpolation within
// it (from 0 for the first bucket); in the +Inf bucket, the highest finite
// bound. False when the histogram is empty.
func (h Hist) quantile(q float64) (float64, bool) {
	count := h.Count()
	if count == 0 {
		return 0, false
	}
	rank := q * count
	i := 0
	for i < len(h.cumulative)-1 && h.cumulative[i] < rank {
		i++
	}
	if math.IsInf(h.bounds[i], 1) {
		if i == 0 {
			return 0, true
		}
		return h.bounds[i-1], true
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = h.bounds[i-1], h.cumulative[i-1]
	}
	in := h.cumulative[i] - below
	if in == 0 {
		return h.bounds[i], true
	}
	return lower + (h.bounds[i]-lower)*(rank-below)/in, true
}

// HistDelta is what the histogram name, its series with labels (each
// name=value of labels, and any other), observed from before to after:
// two scrapes' families, as expfmt parses them. A series absent before
// (not observed yet) counts from zero; absent after, it is an error, and
// so are buckets that changed or a count that went down (the process
// restarted).
func HistDelta(before, after map[string]*dto.MetricFamily, name string, labels map[string]string) (Hist, error) {
	a, err := histOf(after, name, labels)
	if err != nil {
		return Hist{}, err
	}
	if a == nil {
		return Hist{}, fmt.Errorf("histogram %s%v: not in the scrape", name, labels)
	}
	b, err := histOf(before, name, labels)
	if err != nil {
		return Hist{}, err
	}
	if b == nil {
		return *a, nil
	}
	if !slices.Equal(a.bounds, b.bounds) {
		return Hist{}, fmt.Errorf("histogram %s%v: buckets changed between the scrapes", name, labels)
	}
	d := a.clone()
	for i := range d.cumulative {
		d.cumulative[i] -= b.cumulative[i]
		if d.cumulative[i] < 0 {
			return Hist{}, fmt.Errorf("histogram %s%v: its counts went down (restarted?)", name, labels)
		}
	}
	return d, nil
}

// histOf is the series of name with labels in fams, with a +Inf bucket;
// nil when there is none.
func histOf(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (*Hist, error) {
	fam, ok := fams[name]
	if !ok {
		return nil, nil
	}
	if fam.GetType() != dto.MetricType_HISTOGRAM {
		return nil, fmt.Errorf("%s is a %s, not a histogram", name, fam.GetType())
	}
	for _, m := range fam.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		h := &Hist{}
		for _, b := range m.GetHistogram().GetBucket() {
			h.bounds = append(h.bounds, b.GetUpperBound())
			h.cumulative = append(h.cumulative, float64(b.GetCumulativeCount()))
		}
		if len(h.bounds) == 0 || !math.IsInf(h.bounds[len(h.bounds)-1], 1) {
			h.bounds = append(h.bounds, math.Inf(1))
			h.cumulative = append(h.cumulative, float64(m.GetHistogram().GetSampleCount()))
		}
		return h, nil
	}
	return nil, nil
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
