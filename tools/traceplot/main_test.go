package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jaegerTrace is a trace as the query API returns it: a root, an operation
// under it, and two children listed out of order, one failed.
const jaegerTrace = `{"data":[{"traceID":"t","spans":[
 {"spanID":"b","operationName":"CNI ADD","references":[{"refType":"CHILD_OF","spanID":"a"}],"startTime":1000100,"duration":800,"processID":"p2",
  "tags":[{"key":"otel.status_code","value":"ERROR"}]},
 {"spanID":"d","operationName":"ADD failer","references":[{"refType":"CHILD_OF","spanID":"b"}],"startTime":1000500,"duration":100,"processID":"p2",
  "tags":[{"key":"error","value":true}]},
 {"spanID":"a","operationName":"RunPodSandbox","references":[],"startTime":1000000,"duration":1000,"processID":"p1","tags":[]},
 {"spanID":"c","operationName":"ADD bridge","references":[{"refType":"CHILD_OF","spanID":"b"}],"startTime":1000200,"duration":200,"processID":"p2","tags":[]}
],"processes":{"p1":{"serviceName":"runtime"},"p2":{"serviceName":"catena"}}}]}`

func TestRows(t *testing.T) {
	rows, err := Rows([]byte(jaegerTrace))
	require.NoError(t, err)
	us := time.Microsecond
	assert.Equal(t, []Row{
		{Label: "RunPodSandbox [runtime]", Start: 0, End: 1000 * us},
		{Label: "> CNI ADD [catena]", Start: 100 * us, End: 900 * us, Error: true},
		{Label: "> > ADD bridge [catena]", Start: 200 * us, End: 400 * us},
		{Label: "> > ADD failer [catena]", Start: 500 * us, End: 600 * us, Error: true},
	}, rows)

	for _, bad := range []string{`{}`, `{"data":[]}`, `not json`, `{"data":[{"spans":[]}]}`} {
		_, err := Rows([]byte(bad))
		assert.Error(t, err, bad)
	}
}

func TestRunWritesPNG(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "t.json"), filepath.Join(dir, "t.png")
	require.NoError(t, os.WriteFile(in, []byte(jaegerTrace), 0o600))
	require.NoError(t, run(in, out, "a trace"))
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, "\x89PNG", string(b[:4]))
	assert.Error(t, run("", out, ""), "-in is required")
	assert.Error(t, run(filepath.Join(dir, "missing"), out, ""))
}
