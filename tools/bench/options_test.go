package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, o options)
	}{
		{name: "defaults", check: func(t *testing.T, o options) {
			assert.Equal(t, 30, o.n)
			assert.Equal(t, 50, o.conc)
			assert.Equal(t, []int{0, 1000, 10000}, o.scale)
			assert.Equal(t, allPhases, o.phases)
			assert.Equal(t, "bin/bench.png", o.plot)
			assert.False(t, o.docs)
			assert.True(t, filepath.IsAbs(o.cniPath))
			assert.Equal(t, 60, o.checkN)
			assert.True(t, o.runs("check"), "make bench runs the check phase")
		}},
		{name: "check phase alone", args: []string{"-phases", "check", "-check-n", "7", "-conc", "5"},
			check: func(t *testing.T, o options) {
				assert.True(t, o.runs("check"))
				assert.False(t, o.runs("seq"))
				assert.Equal(t, 7, o.checkN)
				assert.Equal(t, 5, o.conc)
			}},
		{name: "no check iterations", args: []string{"-check-n", "0"}, wantErr: "-check-n"},
		{name: "quick run", args: []string{"-n", "5", "-conc", "10", "-conc-rounds", "1", "-scale", "0,1000", "-scale-n", "5", "-rss-n", "0", "-phases", "seq,scale", "-docs"},
			check: func(t *testing.T, o options) {
				assert.Equal(t, 5, o.n)
				assert.Equal(t, []int{0, 1000}, o.scale)
				assert.True(t, o.runs("seq"))
				assert.False(t, o.runs("conc"))
				assert.Zero(t, o.rssN)
				assert.True(t, o.docs)
			}},
		{name: "scale not ascending", args: []string{"-scale", "1000,0"}, wantErr: "ascending"},
		{name: "scale not a number", args: []string{"-scale", "many"}, wantErr: "-scale"},
		{name: "unknown phase", args: []string{"-phases", "seq,fast"}, wantErr: `unknown phase "fast"`},
		{name: "no iterations", args: []string{"-n", "0"}, wantErr: "at least 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags(tc.args)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			tc.check(t, o)
		})
	}
}
