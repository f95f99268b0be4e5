package events

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// opLine is one journal line of an operation of verb.
func opLine(t *testing.T, verb string) string {
	t.Helper()
	b, err := json.Marshal(Op{Verb: verb, Start: time.Now(), Outcome: "ok"})
	require.NoError(t, err)
	return string(b) + "\n"
}

// TestTailTwoRotationsBetweenPolls: the journal rotated twice between two
// polls. The file last read is gone, and what it got after the last poll
// with it: the tail reads the whole of the file rotated since (.1) and
// then the new journal from its start, never resuming mid-file in a new
// file that has the old one's inode, and counts and logs the file it could
// not follow.
func TestTailTwoRotationsBetweenPolls(t *testing.T) {
	for _, tc := range []struct {
		name string
		// reuse: the new journal gets the inode of the file last read (the
		// kernel reuses a freed inode); the test keeps that inode alive
		// under another name and rewrites it, as a reuse would.
		reuse bool
	}{
		{name: "new inodes"},
		{name: "the file last read's inode reused", reuse: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := Path(dir)
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
			var logs bytes.Buffer
			tail, verbs := verbTail(dir)
			tail.Log = slog.New(slog.NewJSONHandler(&logs, nil))
			appendTo(t, path, opLine(t, "A")+opLine(t, "B"))
			require.NoError(t, tail.Poll())
			require.Equal(t, []string{"A", "B"}, *verbs)

			keep := filepath.Join(dir, "events", "kept")
			if tc.reuse {
				require.NoError(t, os.Link(path, keep))
			}
			appendTo(t, path, opLine(t, "lost"))
			require.NoError(t, os.Rename(path, path+".1")) // rotation 1
			appendTo(t, path, opLine(t, "C")+opLine(t, "D"))
			require.NoError(t, os.Rename(path, path+".1")) // rotation 2: the file last read is unlinked
			third := opLine(t, "E") + opLine(t, "F") + opLine(t, "G") + opLine(t, "H")
			if tc.reuse {
				require.NoError(t, os.Truncate(keep, 0))
				appendTo(t, keep, third)
				require.NoError(t, os.Rename(keep, path))
			} else {
				appendTo(t, path, third)
			}
			require.NoError(t, tail.Poll())
			assert.Equal(t, []string{"A", "B", "C", "D", "E", "F", "G", "H"}, *verbs, "the middle file whole, the new one from its start")
			var warning map[string]any
			require.NoError(t, json.Unmarshal(logs.Bytes(), &warning), "one warning: %s", logs.String())
			assert.Equal(t, 1.0, warning["unfollowed"], "the file last read could not be followed")

			logs.Reset()
			appendTo(t, path, opLine(t, "I"))
			require.NoError(t, tail.Poll())
			assert.Equal(t, []string{"A", "B", "C", "D", "E", "F", "G", "H", "I"}, *verbs, "then on as usual")
			assert.Empty(t, logs.String())
		})
	}
}

// TestTailRewrittenInPlace: a journal truncated and rewritten by hand, as
// long as before or longer, is read again from its start: the bytes before
// the saved offset are no longer the last line read. The rotated file,
// read already, is not read again.
func TestTailRewrittenInPlace(t *testing.T) {
	dir := t.TempDir()
	path := Path(dir)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	tail, verbs := verbTail(dir)
	appendTo(t, path+".1", opLine(t, "A"))
	appendTo(t, path, opLine(t, "B"))
	require.NoError(t, tail.Poll())
	require.Equal(t, []string{"A", "B"}, *verbs)

	require.NoError(t, os.Truncate(path, 0))
	appendTo(t, path, opLine(t, "C")+opLine(t, "D"))
	require.NoError(t, tail.Poll())
	assert.Equal(t, []string{"A", "B", "C", "D"}, *verbs)
}
