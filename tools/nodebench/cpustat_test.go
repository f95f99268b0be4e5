package nodebench

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseCPUTimes(t *testing.T) {
	tests := []struct {
		name, in string
		want     CPUTimes
		wantErr  string
	}{
		{name: "kernel 6", in: "cpu  100 2 30 9000 50 4 5 6 7 8\ncpu0 50 1 15 4500 25 2 2 3 3 4\n",
			// 100+2+30+4+5+6; idle, iowait and guest not counted
			want: CPUTimes{Busy: 147 * 10 * time.Millisecond, Idle: 9050 * 10 * time.Millisecond}},
		{name: "old kernel, eight fields", in: "cpu  1 2 3 4 5 6 7 8\n",
			want: CPUTimes{Busy: (1 + 2 + 3 + 6 + 7 + 8) * 10 * time.Millisecond, Idle: (4 + 5) * 10 * time.Millisecond}},
		{name: "not the total", in: "cpu0 1 2 3 4 5 6 7 8\n", wantErr: "not the cpu total"},
		{name: "too short", in: "cpu 1 2 3\n", wantErr: "not the cpu total"},
		{name: "not a number", in: "cpu  1 x 3 4 5 6 7 8\n", wantErr: "field 2"},
		{name: "idle not a number", in: "cpu  1 2 3 x 5 6 7 8\n", wantErr: "field 4"},
		{name: "not /proc/stat", in: "intr 1 2 3 4 5 6 7 8\n", wantErr: "not the cpu total"},
		{name: "empty", in: "", wantErr: "empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseCPUTimes(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestBusyShare(t *testing.T) {
	a, err := parseCPUTimes(strings.NewReader("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4 5\n"))
	require.NoError(t, err)
	b, err := parseCPUTimes(strings.NewReader("cpu  500 0 250 1200 50 0 0 0 0 0\n"))
	require.NoError(t, err)
	assert.InDelta(t, 0.6, a.BusyShare(b), 1e-9, "400 of the 1000 ticks since were idle")
	assert.Zero(t, a.BusyShare(a))
	assert.Zero(t, b.BusyShare(a), "an earlier reading: no share")
}

func TestReadCPUTimesGrows(t *testing.T) {
	before, err := ReadCPUTimes()
	require.NoError(t, err)
	for end := time.Now().Add(60 * time.Millisecond); time.Now().Before(end); { //nolint:revive // burn CPU on purpose
	}
	after, err := ReadCPUTimes()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, after.Busy-before.Busy, 30*time.Millisecond, "60 ms of spinning shows as busy time")
}
