package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ds(msv ...int) []time.Duration { return durs(msv...) }

// sampleResults is a full set of results where catena costs catenaPct% more
// than plain, and the scale levels cost scalePct% more each.
func sampleResults(catenaPct, scalePct int) *results {
	scaled := func(v []time.Duration, pct int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, d := range v {
			out[i] = d * time.Duration(100+pct) / 100
		}
		return out
	}
	base := ds(50, 52, 54, 56, 58)
	return &results{
		seq: &seqResult{by: map[string]*latencies{
			"catena": {add: scaled(base, catenaPct), del: scaled(base, catenaPct)},
			"plain":  {add: base, del: base},
		}},
		conc: &concResult{
			add: map[string][]burst{"catena": {{wall: 110 * time.Millisecond * time.Duration(100+catenaPct) / 100, each: scaled(base, catenaPct), busy: 250 * time.Millisecond}},
				"plain": {{wall: 110 * time.Millisecond, each: base, busy: 200 * time.Millisecond}}},
			del: map[string][]burst{"catena": {{wall: 100 * time.Millisecond, each: base}}, "plain": {{wall: 100 * time.Millisecond, each: base}}},
		},
		scale: []*scaleLevel{
			{records: 0, lat: latencies{add: base, del: base}, rss: []rssSample{{"ADD", 6000, 9000}}},
			{records: 1000, lat: latencies{add: scaled(base, scalePct), del: base}},
		},
		floors: []floor{{phase: "(a) seq", verb: "ADD", n: 5, floor: 40 * time.Millisecond, endToEnd: 54 * time.Millisecond}},
	}
}

func TestReportVerdicts(t *testing.T) {
	tests := []struct {
		name                string
		catenaPct, scalePct int
		wantMet             bool
		want                []string
	}{
		{name: "within targets", catenaPct: 5, scalePct: 3, wantMet: true,
			want: []string{"ADD 1.050", "target <= 1.10: met", "wall 1.050", "node CPU 1.250", "flat: every p50 <= 1.20 x that with 0 records: met", "5.9MiB", "1.350"}},
		{name: "catena too slow", catenaPct: 20, scalePct: 3, want: []string{"ADD 1.200", "NOT met"}},
		{name: "not flat", catenaPct: 5, scalePct: 40, want: []string{"1.400", "records: NOT met"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			met, err := sampleResults(tc.catenaPct, tc.scalePct).report(&out, 50)
			require.NoError(t, err)
			assert.Equal(t, tc.wantMet, met)
			for _, w := range tc.want {
				assert.Contains(t, out.String(), w)
			}
		})
	}
}

func TestWritePlot(t *testing.T) {
	dir := t.TempDir()
	path, docs := filepath.Join(dir, "bin", "bench.png"), filepath.Join(dir, "docs", "bench.png")
	require.NoError(t, sampleResults(5, 3).writePlot(path, docs, 50))
	for _, p := range []string{path, docs} {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		assert.Equal(t, []byte("\x89PNG\r\n\x1a\n"), data[:8], p)
	}
	require.NoError(t, (&results{}).writePlot(filepath.Join(dir, "none.png"), "", 50))
	_, err := os.Stat(filepath.Join(dir, "none.png"))
	assert.True(t, os.IsNotExist(err), "nothing measured, nothing drawn")
}
