package reconcile

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
)

// TestJudgeUnknownID: a namespace ID of 0 is unknown (the kernel gave
// none, or reading it failed), never proof of another namespace. On the
// ADD's inode, with either side's ID unknown, a process in a namespace
// with that inode keeps the sandbox alive, and so does a look that could
// not see every process; only a complete look with no process in any
// namespace of that inode proves it dead.
func TestJudgeUnknownID(t *testing.T) {
	known := netnsID("x")
	unknown := known
	unknown.ID = 0
	for _, tc := range []struct {
		name         string
		recorded     *cache.NetNSIdentity
		now, scanned cache.NetNSIdentity
		process      bool
		incomplete   string
		want         Verdict
		why          string
	}{
		{"unknown at ADD, known now, a process in it", &unknown, known, known, true, "", NSAlive, "is in the netns of its ADD"},
		{"known at ADD, unknown now, a process in it", &known, unknown, unknown, true, "", NSAlive, "is in the netns of its ADD"},
		{"known at ADD, unknown now, processes not all seen", &known, unknown, unknown, false, "no hostPID", NSAlive, "whether a process is in it is unknown"},
		{"unknown at ADD, processes not all seen", &unknown, known, known, false, "no hostPID", NSAlive, "whether a process is in it is unknown"},
		{"unknown at ADD, no process in any namespace of its inode", &unknown, known, known, false, "", NSIdle, "no proof its sandbox is gone"},
		{"no identity recorded, unknown now, a process in it", nil, unknown, known, true, "", NSAlive, "has no netns identity to tell"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := record("x", true)
			rec.NetNSID = tc.recorded
			f := &fakeNetNS{at: map[string]cache.NetNSIdentity{rec.NetNS: tc.now}, in: map[cache.NetNSIdentity]string{}, incomplete: tc.incomplete}
			if tc.process {
				f.in[tc.scanned] = "pid 7 (pause)"
			}
			procs, err := f.Scan()
			require.NoError(t, err)
			ev := judge(f, procs, rec)
			assert.Equal(t, tc.want, ev.Verdict, ev.Why)
			assert.Contains(t, ev.Why, tc.why)
		})
	}
}
