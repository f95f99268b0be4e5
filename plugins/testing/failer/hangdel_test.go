package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHangDel(t *testing.T) {
	fault := filepath.Join(t.TempDir(), "fault")
	tests := []struct {
		name     string
		fields   map[string]any
		fault    bool
		minTime  time.Duration
		maxTime  time.Duration
		wantCode uint
	}{
		{name: "no hang", fields: map[string]any{}, maxTime: 150 * time.Millisecond},
		{name: "hangs", fields: map[string]any{"hangDel": "200ms"}, minTime: 200 * time.Millisecond},
		{name: "hangs while the fault file exists", fields: map[string]any{"hangDel": "200ms", "faultFile": fault}, fault: true, minTime: 200 * time.Millisecond},
		{name: "no hang once the fault is lifted", fields: map[string]any{"hangDel": "10s", "faultFile": fault}, maxTime: 150 * time.Millisecond},
		{name: "then fails if asked", fields: map[string]any{"hangDel": "10ms", "failDel": true}, minTime: 10 * time.Millisecond, wantCode: 100},
		{name: "invalid duration", fields: map[string]any{"hangDel": "soon"}, wantCode: types.ErrInvalidNetworkConfig},
		{name: "negative duration", fields: map[string]any{"hangDel": "-1s"}, wantCode: types.ErrInvalidNetworkConfig},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.fault {
				require.NoError(t, os.WriteFile(fault, nil, 0o600))
				t.Cleanup(func() { _ = os.Remove(fault) })
			}
			start := time.Now()
			err := cmdDelHanging(cmdArgs(conf(t, "1.0.0", tc.fields)))
			took := time.Since(start)
			if tc.wantCode != 0 {
				cniErr(t, err, tc.wantCode)
			} else {
				require.NoError(t, err)
			}
			assert.GreaterOrEqual(t, took, tc.minTime)
			if tc.maxTime > 0 {
				assert.Less(t, took, tc.maxTime)
			}
		})
	}
	cniErr(t, cmdDelHanging(cmdArgs([]byte("{"))), types.ErrDecodingFailure)
}
