package events

import (
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stat is a /proc/<pid>/stat whose command holds ") " and spaces, started
// 12345 ticks (123.45 s) after boot.
const stat = "4242 (cat ) ena x) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 3 0 12345 1000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"

func TestProcessOf(t *testing.T) {
	proc := fstest.MapFS{
		"stat":                 {Data: []byte(stat)},
		"task/4242/schedstat":  {Data: []byte("5000000 7000000 12\n")},
		"task/4243/schedstat":  {Data: []byte("1000000 3000000 4\n")},
		"task/4243/irrelevant": {Data: []byte("x")},
	}
	p, err := ProcessOf(proc, 124*time.Second, 500*time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, OpProcess{Startup: 50 * time.Millisecond, CPU: 6 * time.Millisecond, RunDelay: 10 * time.Millisecond}, *p)

	p, err = ProcessOf(proc, 123*time.Second, 0)
	require.NoError(t, err)
	assert.Zero(t, p.Startup, "never negative (a clock read before the start's tick)")

	for name, bad := range map[string]fstest.MapFS{
		"no stat":             {"task/1/schedstat": {Data: []byte("1 2 3")}},
		"no command":          {"stat": {Data: []byte("4242 S 1")}, "task/1/schedstat": {Data: []byte("1 2 3")}},
		"short stat":          {"stat": {Data: []byte("4242 (c) S 1 2")}, "task/1/schedstat": {Data: []byte("1 2 3")}},
		"no task":             {"stat": {Data: []byte(stat)}},
		"bad schedstat":       {"stat": {Data: []byte(stat)}, "task/1/schedstat": {Data: []byte("x 2 3")}},
		"schedstat too short": {"stat": {Data: []byte(stat)}, "task/1/schedstat": {Data: []byte("1")}},
	} {
		_, err := ProcessOf(bad, time.Hour, 0)
		assert.Error(t, err, name)
	}
}

// TestSelfProcess reads this process: it started before now, and its
// threads used some CPU.
func TestSelfProcess(t *testing.T) {
	p, err := SelfProcess(time.Now())
	require.NoError(t, err)
	assert.Positive(t, p.Startup)
	assert.Positive(t, p.CPU)
}

// BenchmarkSelfProcess is what the process block costs a catena call: a
// read of /proc/self/stat and of each thread's schedstat.
func BenchmarkSelfProcess(b *testing.B) {
	start := time.Now()
	for b.Loop() {
		if _, err := SelfProcess(start); err != nil {
			b.Fatal(err)
		}
	}
}
