package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFlood(t *testing.T) {
	tests := []struct {
		name                   string
		conf                   NetConf
		wantStdout, wantStderr string
	}{
		{"nothing", NetConf{}, "", ""},
		{"stdout", NetConf{FloodStdout: 3}, "   ", ""},
		{"stderr, cut short", NetConf{FloodStderr: 30}, "", "failer DEL stderr noise\nfailer"},
		{"stderr, many chunks", NetConf{FloodStderr: 3*floodChunk + 7}, "",
			strings.Repeat(stderrNoise("DEL"), (3*floodChunk+7)/len(stderrNoise("DEL"))+1)[:3*floodChunk+7]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			require.NoError(t, tt.conf.flood("DEL", &stdout, &stderr))
			// Not assert.Equal: a mismatch would print megabytes.
			assert.True(t, tt.wantStdout == stdout.String(), "stdout: %d bytes, want %d", stdout.Len(), len(tt.wantStdout))
			assert.True(t, tt.wantStderr == stderr.String(), "stderr: %d bytes, want %d", stderr.Len(), len(tt.wantStderr))
		})
	}
}

func TestPadError(t *testing.T) {
	c := &NetConf{PadError: 5}
	err := c.injected(100, "ADD", &skel.CmdArgs{ContainerID: "c", IfName: "eth0"})
	assert.Equal(t, "failer: injected ADD failurexxxxx", err.Msg)
	assert.Equal(t, "failer: injected ADD failure", (&NetConf{}).injected(100, "ADD", &skel.CmdArgs{}).Msg)
}
