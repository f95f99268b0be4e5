package main

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/internal/clitest"
	"github.com/catena-cni/catena/libchain/events"
)

// TestOutputWriteErrorFails: a write to stdout that fails (a full disk, a
// closed pipe) fails the command, exit 1, saying so, wherever it happens:
// its output is not cut short under exit 0.
func TestOutputWriteErrorFails(t *testing.T) {
	f := newFixture(t)
	f.save("c-stuck", "eth0", cache.PhaseNeedsTeardown, time.Hour, []string{"okplug", "badplug"}, cache.StepAdded, cache.StepDelFailed)
	f.save("c-stuck", "net1", cache.PhaseComplete, time.Hour, []string{"okplug"}, cache.StepAdded)
	j := &events.Writer{CacheDir: f.cacheDir}
	require.NoError(t, j.Append(events.Op{Verb: "ADD", Attachment: "podnet/c-stuck/eth0", Start: f.now.Add(-30 * time.Minute), Duration: 2 * ms,
		Outcome: "ok", Calls: []events.OpCall{{Index: 0, Type: "okplug", Verb: "ADD", Duration: ms}}}))
	writeEvents(t, f) // ends with a torn line
	tests := []struct {
		name   string
		args   []string
		failOn string
	}{
		{"show: a record's table", []string{"show", "c-stuck", "--ifname", "eth0"}, "phase"},
		{"show: a delegate's config", []string{"show", "c-stuck", "--ifname", "eth0"}, "config: "},
		{"show: the second record", []string{"show", "c-stuck"}, "c-stuck/net1"},
		{"stats: the summary", []string{"stats", "--window", "1m"}, "operation(s)"},
		{"stats: the lines skipped", []string{"stats", "--window", "1m"}, "unreadable"},
		{"stats: a table", []string{"stats"}, "LOCK-WAIT-P50"},
		{"list: the table", []string{"list"}, "c-stuck"},
		{"trace: the attachment", []string{"trace", "c-stuck"}, "operation(s)"},
		{"trace: a header", []string{"trace", "c-stuck"}, "total"},
		{"trace: a row", []string{"trace", "c-stuck"}, "okplug"},
		{"trace --json", []string{"trace", "c-stuck", "--json"}, "steps"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := &clitest.FailWriter{On: tc.failOn}
			var errOut bytes.Buffer
			code := run(append([]string{"--conf", f.confPath, "--cni-path", f.cniDir}, tc.args...), env{
				stdout: out, stderr: &errOut,
				getenv:   func(string) string { return "" },
				now:      func() time.Time { return f.now },
				netDir:   f.netDir,
				ownerUID: os.Geteuid(),
			})
			assert.Equal(t, 1, code, "stdout so far:\n%s\nstderr:\n%s", out.Written.String(), errOut.String())
			assert.Contains(t, errOut.String(), clitest.ErrWrite.Error())
			assert.Contains(t, errOut.String(), "writing ")
		})
	}
}

// TestPrinterKeepsFirstError: after a failed write the printer writes
// nothing more, and err returns that first error.
func TestPrinterKeepsFirstError(t *testing.T) {
	w := &clitest.FailWriter{On: "two"}
	p := &printer{w: w}
	p.printf("one\n")
	require.NoError(t, p.err())
	p.printf("%s\n", "two")
	p.printf("three\n")
	require.ErrorIs(t, p.err(), clitest.ErrWrite)
	assert.Equal(t, "one\n", w.Written.String())
}
