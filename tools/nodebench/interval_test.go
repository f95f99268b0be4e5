package nodebench

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRatioInterval(t *testing.T) {
	// Every Catena round exactly 1.2 times every primary round: no
	// resample can say otherwise.
	same := []Round{
		round(Primary, 3, 0, 1, 3, nil, 100, 200, 300),
		round(Catena, 3, 1, 1, 3, nil, 120, 240, 360),
		round(Catena, 3, 2, 1, 3, nil, 120, 240, 360),
		round(Primary, 3, 3, 1, 3, nil, 100, 200, 300),
	}
	lo, hi, ok, err := ratioInterval(same, 3, CreatedReady)
	require.NoError(t, err)
	require.True(t, ok)
	assert.InDelta(t, 1.2, lo, 1e-9)
	assert.InDelta(t, 1.2, hi, 1e-9)

	// Rounds that differ: the interval holds the pooled ratio (1.2 here),
	// is wider than a point, and the same rounds give the same interval.
	varied := []Round{
		round(Primary, 3, 0, 1, 3, nil, 100, 100, 100),
		round(Catena, 3, 1, 1, 3, nil, 120, 120, 120),
		round(Catena, 3, 2, 1, 3, nil, 240, 240, 240),
		round(Primary, 3, 3, 1, 3, nil, 200, 200, 200),
		round(Primary, 3, 4, 1, 3, nil, 150, 150, 150),
		round(Catena, 3, 5, 1, 3, nil, 180, 180, 180),
	}
	lo, hi, ok, err = ratioInterval(varied, 3, CreatedReady)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Less(t, lo, 1.2)
	assert.Greater(t, hi, 1.2)
	assert.GreaterOrEqual(t, lo, 0.6, "at least the smallest Catena over the largest primary round")
	assert.LessOrEqual(t, hi, 2.4, "at most the largest Catena over the smallest primary round")
	lo2, hi2, _, err := ratioInterval(varied, 3, CreatedReady)
	require.NoError(t, err)
	assert.Equal(t, [2]float64{lo, hi}, [2]float64{lo2, hi2}, "reproducible")

	// One round of a variant, another N, or a measure no round has: none.
	for name, tc := range map[string]struct {
		rounds []Round
		n      int
		m      Measure
	}{
		"one round of Catena": {rounds: same[:3][:2], n: 3, m: CreatedReady},
		"no round at that N":  {rounds: same, n: 60, m: CreatedReady},
		"not measured":        {rounds: same, n: 3, m: CatenaAdd},
	} {
		_, _, ok, err := ratioInterval(tc.rounds, tc.n, tc.m)
		require.NoError(t, err, name)
		assert.False(t, ok, name)
	}
}
