package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFaultDir(t *testing.T) {
	addFn := func(a *skel.CmdArgs) error { _, err := add(a); return err }
	tests := []struct {
		name    string
		files   map[string]string
		fn      func(*skel.CmdArgs) error
		wantErr string
		atLeast time.Duration
	}{
		{name: "add without files", fn: addFn},
		{name: "del without files", fn: cmdDel},
		{name: "fail-add fails ADD", files: map[string]string{"fail-add": ""}, fn: addFn, wantErr: "injected ADD failure"},
		{name: "fail-add leaves DEL", files: map[string]string{"fail-add": ""}, fn: cmdDel},
		{name: "fail-del fails DEL", files: map[string]string{"fail-del": ""}, fn: cmdDel, wantErr: "injected DEL failure"},
		{name: "fail-del leaves ADD", files: map[string]string{"fail-del": ""}, fn: addFn},
		{name: "hang-add sleeps", files: map[string]string{"hang-add": "150ms\n"}, fn: addFn, atLeast: 150 * time.Millisecond},
		{name: "hang-del sleeps then fails", files: map[string]string{"hang-del": "150ms", "fail-del": ""}, fn: cmdDel, wantErr: "injected DEL failure", atLeast: 150 * time.Millisecond},
		{name: "bad hang duration", files: map[string]string{"hang-add": "soon"}, fn: addFn, wantErr: `invalid hang-add "soon"`},
		// go test is the parent here, not catena: kill-add refuses
		{name: "kill-add spares a parent that is not catena", files: map[string]string{"kill-add": ""}, fn: addFn, wantErr: "not catena"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
			}
			start := time.Now()
			err := tc.fn(cmdArgs(conf(t, "1.1.0", map[string]any{"faultDir": dir})))
			assert.GreaterOrEqual(t, time.Since(start), tc.atLeast)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}
