package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTraceEnv: the trace log keeps every carrier of the environment as
// exec handed it, in order, a name set twice twice, and nothing else.
func TestTraceEnv(t *testing.T) {
	path := filepath.Join(t.TempDir(), "environ")
	env := []string{"PATH=/bin", "TRACEPARENT=a", "XTRACEPARENT=no", "BAGGAGE=k=v", "TRACEPARENT=b", "TRACESTATE=s", ""}
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(env, "\x00")), 0o600))
	got, err := traceEnv(path)
	require.NoError(t, err)
	assert.Equal(t, []string{"TRACEPARENT=a", "BAGGAGE=k=v", "TRACEPARENT=b", "TRACESTATE=s"}, got)
}

// TestTraceLog: with traceLog set, each logged call appends its line to
// trace.log, with its own process's carriers; without, there is none.
func TestTraceLog(t *testing.T) {
	for _, on := range []bool{true, false} {
		dir := t.TempDir()
		stdin := conf(t, "1.0.0", dir, "")
		if on {
			stdin = []byte(strings.Replace(string(stdin), `"logDir"`, `"traceLog":true,"logDir"`, 1))
		}
		require.NoError(t, record("DEL", cmdArgs("c1", stdin)))
		raw, err := os.ReadFile(filepath.Join(dir, traceLogName))
		if !on {
			assert.ErrorIs(t, err, os.ErrNotExist)
			continue
		}
		require.NoError(t, err)
		var c TraceCall
		require.NoError(t, json.Unmarshal(raw, &c))
		assert.Equal(t, "DEL", c.Verb)
		assert.Equal(t, "c1", c.ContainerID)
		want, err := traceEnv("/proc/self/environ")
		require.NoError(t, err)
		assert.Equal(t, want, c.Env)
	}
}
