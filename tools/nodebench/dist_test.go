package nodebench

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

func TestSamplesQuantile(t *testing.T) {
	tests := []struct {
		name    string
		samples []time.Duration
		q       float64
		want    time.Duration
		ok      bool
	}{
		{name: "empty", samples: nil, q: 0.5},
		{name: "one", samples: ms(7), q: 0.99, want: 7 * time.Millisecond, ok: true},
		{name: "median of 4 is the 2nd", samples: ms(40, 10, 30, 20), q: 0.5, want: 20 * time.Millisecond, ok: true},
		{name: "median of 5", samples: ms(50, 10, 40, 20, 30), q: 0.5, want: 30 * time.Millisecond, ok: true},
		{name: "p90 of 10 is the 9th", samples: ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), q: 0.9, want: 9 * time.Millisecond, ok: true},
		{name: "p99 of 10 is the max", samples: ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), q: 0.99, want: 10 * time.Millisecond, ok: true},
		{name: "p99 of 200 is the 198th", samples: func() []time.Duration {
			var v []int
			for i := 200; i >= 1; i-- {
				v = append(v, i)
			}
			return ms(v...)
		}(), q: 0.99, want: 198 * time.Millisecond, ok: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := append([]time.Duration(nil), tc.samples...)
			got, ok := Dist{samples: tc.samples}.Quantile(tc.q)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, before, tc.samples, "the samples are left unsorted")
		})
	}
}

var inf = math.Inf(1)

func TestHistQuantile(t *testing.T) {
	// 10 observations: 2 <= 0.1 s, 4 more <= 0.5 s, 4 more <= 1 s
	h := Hist{bounds: []float64{0.1, 0.5, 1, inf}, cumulative: []float64{2, 6, 10, 10}}
	tests := []struct {
		name string
		h    Hist
		q    float64
		want float64
		ok   bool
	}{
		{name: "in the first bucket, from 0", h: h, q: 0.1, want: 0.05, ok: true},
		{name: "median", h: h, q: 0.5, want: 0.4, ok: true},
		{name: "p99", h: h, q: 0.99, want: 0.9875, ok: true},
		{name: "in +Inf: the highest finite bound", h: Hist{bounds: []float64{0.1, 0.5, 1, inf}, cumulative: []float64{1, 1, 1, 3}}, q: 0.9, want: 1, ok: true},
		{name: "empty", h: Hist{bounds: []float64{0.1, inf}, cumulative: []float64{0, 0}}, q: 0.5},
		{name: "no buckets", h: Hist{}, q: 0.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.h.quantile(tc.q)
			assert.Equal(t, tc.ok, ok)
			assert.InDelta(t, tc.want, got, 1e-9)
			d, dok := Dist{hist: &tc.h}.Quantile(tc.q)
			assert.Equal(t, tc.ok, dok)
			assert.InDelta(t, tc.want*float64(time.Second), float64(d), 1)
		})
	}
	assert.Equal(t, 10, Dist{hist: &h}.Count())
}

// families parses a scrape in Prometheus's text format.
func families(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	require.NoError(t, err)
	return fams
}

// cniScrape is containerd's CRI histogram with set_up_pod's and
// tear_down_pod's cumulative counts at 0.1, 0.5 and +Inf.
func cniScrape(setUp, tearDown [3]int) string {
	var b strings.Builder
	b.WriteString("# TYPE containerd_cri_network_plugin_operations_duration_seconds_seconds histogram\n")
	for _, s := range []struct {
		op string
		c  [3]int
	}{{"set_up_pod", setUp}, {"tear_down_pod", tearDown}} {
		for i, le := range []string{"0.1", "0.5", "+Inf"} {
			b.WriteString(`containerd_cri_network_plugin_operations_duration_seconds_seconds_bucket{operation_type="` + s.op + `",le="` + le + `"} ` + strconv.Itoa(s.c[i]) + "\n")
		}
		b.WriteString(`containerd_cri_network_plugin_operations_duration_seconds_seconds_count{operation_type="` + s.op + `"} ` + strconv.Itoa(s.c[2]) + "\n")
		b.WriteString(`containerd_cri_network_plugin_operations_duration_seconds_seconds_sum{operation_type="` + s.op + `"} 1` + "\n")
	}
	return b.String()
}

func TestHistDelta(t *testing.T) {
	const name = ContainerdCNIMetric
	setUp := map[string]string{"operation_type": "set_up_pod"}
	tests := []struct {
		name          string
		before, after string
		labels        map[string]string
		want          Hist
		wantErr       string
	}{
		{name: "the round's observations", before: cniScrape([3]int{2, 3, 3}, [3]int{1, 1, 1}), after: cniScrape([3]int{4, 8, 9}, [3]int{1, 2, 2}),
			labels: setUp, want: Hist{bounds: []float64{0.1, 0.5, inf}, cumulative: []float64{2, 5, 6}}},
		{name: "by its labels", before: cniScrape([3]int{2, 3, 3}, [3]int{1, 1, 1}), after: cniScrape([3]int{4, 8, 9}, [3]int{1, 2, 2}),
			labels: map[string]string{"operation_type": "tear_down_pod"}, want: Hist{bounds: []float64{0.1, 0.5, inf}, cumulative: []float64{0, 1, 1}}},
		{name: "not observed before: from zero", before: "", after: cniScrape([3]int{1, 2, 2}, [3]int{0, 0, 0}),
			labels: setUp, want: Hist{bounds: []float64{0.1, 0.5, inf}, cumulative: []float64{1, 2, 2}}},
		{name: "not in the scrape after", before: "", after: "# TYPE other counter\nother 1\n", labels: setUp, wantErr: "not in the scrape"},
		{name: "counts went down", before: cniScrape([3]int{4, 8, 9}, [3]int{0, 0, 0}), after: cniScrape([3]int{1, 1, 1}, [3]int{0, 0, 0}),
			labels: setUp, wantErr: "went down"},
		{name: "not a histogram", before: "", after: "# TYPE " + name + " counter\n" + name + " 3\n", wantErr: "not a histogram"},
		{name: "buckets changed", before: cniScrape([3]int{1, 1, 1}, [3]int{0, 0, 0}),
			after: strings.ReplaceAll(cniScrape([3]int{2, 2, 2}, [3]int{0, 0, 0}), `le="0.5"`, `le="0.25"`), labels: setUp, wantErr: "buckets changed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := HistDelta(families(t, tc.before), families(t, tc.after), name, tc.labels)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestMerge(t *testing.T) {
	h1 := Hist{bounds: []float64{0.1, inf}, cumulative: []float64{1, 2}}
	h2 := Hist{bounds: []float64{0.1, inf}, cumulative: []float64{3, 3}}
	other := Hist{bounds: []float64{0.2, inf}, cumulative: []float64{1, 1}}
	tests := []struct {
		name    string
		in      []Dist
		want    Dist
		wantErr string
	}{
		{name: "samples", in: []Dist{{samples: ms(1, 2)}, {}, {samples: ms(3)}}, want: Dist{samples: ms(1, 2, 3)}},
		{name: "histograms", in: []Dist{{hist: &h1}, {}, {hist: &h2}}, want: Dist{hist: &Hist{bounds: []float64{0.1, inf}, cumulative: []float64{4, 5}}}},
		{name: "nothing", in: nil, want: Dist{}},
		{name: "samples then a histogram", in: []Dist{{samples: ms(1)}, {hist: &h1}}, wantErr: "samples and a histogram"},
		{name: "a histogram then samples", in: []Dist{{hist: &h1}, {samples: ms(1)}}, wantErr: "samples and a histogram"},
		{name: "other buckets", in: []Dist{{hist: &h1}, {hist: &other}}, wantErr: "differ"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Merge(tc.in...)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	assert.Equal(t, []float64{1, 2}, h1.cumulative, "merging leaves its inputs alone")
}
