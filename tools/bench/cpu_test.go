package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseTaskClock(t *testing.T) {
	tests := []struct {
		name, in string
		want     time.Duration
		wantErr  bool
	}{
		{name: "perf -x, line", in: "# started on Thu\n\n11.43,msec,task-clock,11426893,100.00,0.717,CPUs utilized\n", want: 11430 * time.Microsecond},
		{name: "not counted", in: "<not counted>,msec,task-clock,0,0.00,,\n", wantErr: true},
		{name: "another unit", in: "11.43,usec,task-clock,1,100.00,,\n", wantErr: true},
		{name: "no task-clock", in: "5,,cycles,1,100.00,,\n", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseTaskClock(tc.in)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.InDelta(t, float64(tc.want), float64(got), float64(time.Microsecond))
		})
	}
}

// TestCPURows: catena's share is its median less the noop's median for each
// delegate call it made, by verb, and the ratio is over minimal's median;
// without perf the rusage figures are used.
func TestCPURows(t *testing.T) {
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	samples := func(field string, vs ...float64) []cpuSample {
		var out []cpuSample
		for _, v := range vs {
			s := cpuSample{maxrss: 2048}
			if field == "clock" {
				s.clock = ms(v)
			} else {
				s.rusage = ms(v)
			}
			out = append(out, s)
		}
		return out
	}
	kinds := []cpuKind{{name: "minimal"}, {name: "noop ADD"}, {name: "noop DEL"}, {name: "catena ADD", catena: true}, {name: "catena DEL", catena: true}}
	for _, perf := range []bool{true, false} {
		field, where := "clock", "perf"
		if !perf {
			field, where = "rusage", "direct"
		}
		r := &cpuResult{perf: perf, kinds: kinds, perfRuns: map[string][]cpuSample{}, direct: map[string][]cpuSample{},
			calls: map[string][]string{"catena ADD": {"ADD", "ADD", "ADD"}, "catena DEL": {"DEL", "ADD"}}}
		put := func(name string, vs ...float64) {
			if where == "perf" {
				r.perfRuns[name] = samples(field, vs...)
			}
			r.direct[name] = append(r.direct[name], samples("rusage", vs...)...)
		}
		put("minimal", 1, 2, 3)
		put("noop ADD", 1.5, 1.5, 9)
		put("noop DEL", 1, 1, 1)
		put("catena ADD", 8, 8.5, 100)
		put("catena DEL", 6, 6, 6)
		rows := r.rows()
		require.Len(t, rows, 5)
		assert.InDelta(t, 8.5-3*1.5, rows[3].share, 1e-9, "perf %v", perf)
		assert.InDelta(t, (8.5-3*1.5)/2, rows[3].ratio, 1e-9, "perf %v", perf)
		assert.Equal(t, "3xADD", rows[3].calls)
		assert.InDelta(t, 6-1-1.5, rows[4].share, 1e-9, "perf %v", perf)
		assert.Equal(t, "1xDEL+1xADD", rows[4].calls)
		assert.Equal(t, int64(2048), rows[4].rssM)
	}
}

// TestCheckAgainstNoRecord: the cpu table's CHECK share is set beside the
// DEL with no record of the same binary, and the verdict follows.
func TestCheckAgainstNoRecord(t *testing.T) {
	rows := []cpuRow{
		{name: "minimal"},
		{name: "catena CHECK", share: 3.7, catena: true},
		{name: "catena DEL no record", share: 2.7, catena: true},
		{name: "alt CHECK", share: 2.5, catena: true},
		{name: "alt DEL no record", share: 2.6, catena: true},
		{name: "lone CHECK", share: 1, catena: true},
	}
	tests := []struct {
		label         string
		wantCheck     float64
		wantNoRecord  float64
		wantFound     bool
		wantVerdictOK bool
	}{
		{label: "catena", wantCheck: 3.7, wantNoRecord: 2.7, wantFound: true},
		{label: "alt", wantCheck: 2.5, wantNoRecord: 2.6, wantFound: true, wantVerdictOK: true},
		{label: "lone"},
		{label: "absent"},
	}
	for _, tc := range tests {
		t.Run(tc.label, func(t *testing.T) {
			check, nr, found := checkAgainstNoRecord(rows, tc.label)
			require.Equal(t, tc.wantFound, found)
			if !found {
				return
			}
			assert.InDelta(t, tc.wantCheck, check, 1e-9)
			assert.InDelta(t, tc.wantNoRecord, nr, 1e-9)
			assert.Equal(t, tc.wantVerdictOK, check <= nr)
		})
	}
}
