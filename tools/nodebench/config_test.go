package nodebench

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConfigFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    Config
		wantErr string
	}{
		{name: "unset: make test's size", env: nil, want: Config{Counts: []int{3}, Rounds: 1}},
		{name: "make bench-node's", env: map[string]string{envCounts: "30,60", envRounds: "5", envOut: "/o", envDocs: "/d"},
			want: Config{Counts: []int{30, 60}, Rounds: 5, Out: "/o", Docs: "/d"}},
		{name: "spaces", env: map[string]string{envCounts: " 10 , 2", envRounds: " 2 "}, want: Config{Counts: []int{10, 2}, Rounds: 2}},
		{name: "zero pods", env: map[string]string{envCounts: "0"}, wantErr: envCounts},
		{name: "too many pods", env: map[string]string{envCounts: "201"}, wantErr: "from 1 to 200"},
		{name: "not a number", env: map[string]string{envCounts: "30,x"}, wantErr: `"x"`},
		{name: "twice", env: map[string]string{envCounts: "30,30"}, wantErr: "30 given twice"},
		{name: "empty item", env: map[string]string{envCounts: "30,"}, wantErr: envCounts},
		{name: "zero rounds", env: map[string]string{envRounds: "0"}, wantErr: envRounds},
		{name: "rounds not a number", env: map[string]string{envRounds: "many"}, wantErr: `"many"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ConfigFromEnv(func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, c)
		})
	}
}

func TestSchedule(t *testing.T) {
	const A, B = Primary, Catena
	tests := []struct {
		rounds int
		want   []Variant
	}{
		{1, []Variant{A, B}},
		{2, []Variant{A, B, B, A}},
		{3, []Variant{A, B, B, A, A, B}},
		{5, []Variant{A, B, B, A, A, B, B, A, A, B}},
	}
	for _, tc := range tests {
		got := Schedule(tc.rounds)
		assert.Equal(t, tc.want, got, "%d rounds", tc.rounds)
		each := map[Variant]int{}
		for _, v := range got {
			each[v]++
		}
		assert.Equal(t, map[Variant]int{A: tc.rounds, B: tc.rounds}, each, "each variant runs every round")
	}
}

func TestVariantString(t *testing.T) {
	assert.Equal(t, "primary", Primary.String())
	assert.Equal(t, "catena", Catena.String())
	names := Names{Primary: "flannel", Catena: "Catena over flannel"}
	assert.Equal(t, "flannel", names.of(Primary))
	assert.Equal(t, "Catena over flannel", names.of(Catena))
}

func TestParseLoadAvg(t *testing.T) {
	tests := []struct {
		in      string
		want    float64
		wantErr bool
	}{
		{in: "1.63 0.91 1.06 2/345 6789\n", want: 1.63},
		{in: "12.00 9.5 8 1/1 1", want: 12},
		{in: "", wantErr: true},
		{in: "high 1 1", wantErr: true},
	}
	for _, tc := range tests {
		v, err := ParseLoadAvg(tc.in)
		if tc.wantErr {
			assert.Error(t, err, "%q", tc.in)
			continue
		}
		require.NoError(t, err, "%q", tc.in)
		assert.InDelta(t, tc.want, v, 1e-9)
	}
}
