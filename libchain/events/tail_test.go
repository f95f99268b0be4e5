package events

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	require.NoError(t, err)
	_, err = f.WriteString(s)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// verbTail is a Tail of dir that collects the verbs it reads.
func verbTail(dir string) (*Tail, *[]string) {
	var verbs []string
	return &Tail{CacheDir: dir, Handle: func(op Op) { verbs = append(verbs, op.Verb) }}, &verbs
}

// TestTailFollowsRotation: every operation is read once, across polls, a
// line written in two halves and rotations between polls.
func TestTailFollowsRotation(t *testing.T) {
	dir := t.TempDir()
	path := Path(dir)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	line := func(verb string) string { return opLine(t, verb) }
	tail, verbs := verbTail(dir)

	require.NoError(t, tail.Poll(), "no journal yet")
	appendTo(t, path+".1", line("A"))
	appendTo(t, path, line("B"))
	require.NoError(t, tail.Poll())
	assert.Equal(t, []string{"A", "B"}, *verbs, "the rotated file first")

	half := line("C")
	appendTo(t, path, half[:10])
	require.NoError(t, tail.Poll())
	assert.Equal(t, []string{"A", "B"}, *verbs, "half a line waits")
	appendTo(t, path, half[10:])
	require.NoError(t, tail.Poll())
	assert.Equal(t, []string{"A", "B", "C"}, *verbs)

	// Lines appended to the old file after the last poll are read from
	// .1, then the new file from its start.
	appendTo(t, path, line("D"))
	require.NoError(t, os.Rename(path, path+".1"))
	appendTo(t, path, line("E"))
	require.NoError(t, tail.Poll())
	require.NoError(t, tail.Poll())
	assert.Equal(t, []string{"A", "B", "C", "D", "E"}, *verbs, "nothing read twice")
}

// TestTailBound: the tail reads a line of MaxLine bytes, as Read does and
// as long as Append ever writes; one byte more is skipped, counted and
// logged, once per poll.
func TestTailBound(t *testing.T) {
	dir := t.TempDir()
	path := Path(dir)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	var logs bytes.Buffer
	unreadable := &countLines{}
	tail, verbs := verbTail(dir)
	tail.Unreadable, tail.Log = unreadable, slog.New(slog.NewJSONHandler(&logs, nil))
	padded := func(n int) string { // an operation of n bytes
		op := `{"verb":"ADD","outcome":"ok"}`
		return op[:len(op)-1] + strings.Repeat(" ", n-len(op)) + "}\n"
	}
	appendTo(t, path, padded(MaxLine)+padded(MaxLine+1)+"junk\n")
	require.NoError(t, tail.Poll())
	assert.Equal(t, []string{"ADD"}, *verbs)
	assert.Equal(t, 2.0, unreadable.n)
	var warning map[string]any
	require.NoError(t, json.Unmarshal(logs.Bytes(), &warning), "one warning: %s", logs.String())
	assert.Equal(t, 2.0, warning["lines"])
	assert.Equal(t, float64(MaxLine+1), warning["offset"], "the second line")
	assert.Equal(t, float64(MaxLine+2), warning["bytes"], "with its newline")
	assert.Equal(t, "longer than 65536 bytes", warning["why"])

	logs.Reset()
	appendTo(t, path, padded(100))
	require.NoError(t, tail.Poll())
	assert.Empty(t, logs.String(), "a poll that skips nothing logs nothing")
	assert.Equal(t, []string{"ADD", "ADD"}, *verbs)
	assert.Equal(t, 2.0, unreadable.n)
}
