package benchplot

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
)

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

func TestCDF(t *testing.T) {
	tests := []struct {
		name  string
		in    []time.Duration
		wantX []float64
		wantY []float64
	}{
		{name: "sorted on the way", in: ms(30, 10, 20, 40), wantX: []float64{10, 20, 30, 40}, wantY: []float64{0.25, 0.5, 0.75, 1}},
		{name: "one", in: ms(7), wantX: []float64{7}, wantY: []float64{1}},
		{name: "none", in: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			xys := CDF(tc.in)
			require.Len(t, xys, len(tc.wantX))
			for i := range xys {
				assert.Equal(t, tc.wantX[i], xys[i].X)
				assert.Equal(t, tc.wantY[i], xys[i].Y)
			}
		})
	}
}

func TestWritePNG(t *testing.T) {
	dir := t.TempDir()
	p, err := Panel("a", "fraction of pods", "one", CDF(ms(1, 2, 3)), "two", CDF(ms(2, 3, 4)))
	require.NoError(t, err)
	paths := []string{filepath.Join(dir, "bin", "x.png"), filepath.Join(dir, "docs", "x.png")}
	require.NoError(t, WritePNG([]*plot.Plot{p, p}, paths...))
	for _, path := range paths {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, []byte("\x89PNG\r\n\x1a\n"), data[:8], path)
	}
	none := filepath.Join(dir, "none.png")
	require.NoError(t, WritePNG(nil, none))
	_, err = os.Stat(none)
	assert.True(t, os.IsNotExist(err), "no panel, no file")
}

func TestPanelRefusesBadSeries(t *testing.T) {
	_, err := Panel("bad", "y", "nan", plotter.XYs{{X: math.NaN(), Y: 1}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `plot "bad"`)
}
