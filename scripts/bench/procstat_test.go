package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseBusy(t *testing.T) {
	tests := []struct {
		name, in string
		want     time.Duration
		wantErr  string
	}{
		{name: "kernel 6", in: "cpu  100 2 30 9000 50 4 5 6 7 8\ncpu0 50 1 15 4500 25 2 2 3 3 4\n",
			want: 147 * 10 * time.Millisecond}, // 100+2+30+4+5+6; idle, iowait and guest not counted
		{name: "old kernel, eight fields", in: "cpu  1 2 3 4 5 6 7 8\n", want: (1 + 2 + 3 + 6 + 7 + 8) * 10 * time.Millisecond},
		{name: "not the total", in: "cpu0 1 2 3 4 5 6 7 8\n", wantErr: "not the cpu total"},
		{name: "too short", in: "cpu 1 2 3\n", wantErr: "not the cpu total"},
		{name: "not a number", in: "cpu  1 x 3 4 5 6 7 8\n", wantErr: "field 2"},
		{name: "empty", in: "", wantErr: "empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseBusy(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestNodeBusyGrows(t *testing.T) {
	before, err := nodeBusy()
	require.NoError(t, err)
	for end := time.Now().Add(60 * time.Millisecond); time.Now().Before(end); { //nolint:revive // burn CPU on purpose
	}
	after, err := nodeBusy()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, after-before, 30*time.Millisecond, "60 ms of spinning shows as busy time")
}
