package events

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type countLines struct{ n float64 }

func (c *countLines) Add(n float64) { c.n += n }

// TestReadAndTailAgree: a whole-file Read and a Tail read the same
// operations from the same journal and skip the same lines, whatever the
// journal holds: empty lines are no lines, and JSON that is no operation
// is skipped by both.
func TestReadAndTailAgree(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	op := func(verb string) string {
		b, err := json.Marshal(Op{Verb: verb, Start: t0, Outcome: "ok"})
		require.NoError(t, err)
		return string(b) + "\n"
	}
	tests := []struct {
		name    string
		journal string
		verbs   []string
		skipped int
	}{
		{"operations", op("ADD") + op("DEL"), []string{"ADD", "DEL"}, 0},
		{"empty lines", "\n" + op("ADD") + "\n\n" + op("DEL") + "\n", []string{"ADD", "DEL"}, 0},
		{"json without a verb", "{}\n" + `{"outcome":"ok","durationNs":5}` + "\n" + op("ADD"), []string{"ADD"}, 2},
		{"json of another shape", "[1,2]\n\"str\"\nnull\n" + op("ADD"), []string{"ADD"}, 3},
		{"junk", "not json\n\x00\xff\n" + op("GC"), []string{"GC"}, 2},
		{"too long", op("ADD") + strings.Repeat("x", MaxLine+1) + "\n" + op("DEL"), []string{"ADD", "DEL"}, 1},
		{"exactly the bound", `{"verb":"ADD"` + strings.Repeat(" ", MaxLine-len(`{"verb":"ADD"}`)) + "}\n", []string{"ADD"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.MkdirAll(filepath.Join(dir, dirName), 0o700))
			require.NoError(t, os.WriteFile(Path(dir), []byte(tt.journal), 0o600))

			ops, skipped, err := Read(afero.NewOsFs(), dir, time.Time{})
			require.NoError(t, err)
			var read []string
			for _, o := range ops {
				read = append(read, o.Verb)
			}

			var tailed []string
			unreadable := &countLines{}
			var logs bytes.Buffer
			tail := &Tail{CacheDir: dir, Handle: func(o Op) { tailed = append(tailed, o.Verb) }, Unreadable: unreadable,
				Log: slog.New(slog.NewJSONHandler(&logs, nil))}
			require.NoError(t, tail.Poll())

			assert.Equal(t, tt.verbs, read, "Read")
			assert.Equal(t, tt.verbs, tailed, "Tail")
			assert.Equal(t, tt.skipped, skipped.Lines, "Read skipped")
			assert.Equal(t, float64(tt.skipped), unreadable.n, "Tail skipped")
			if tt.skipped == 0 {
				assert.Empty(t, logs.String(), "Tail logs nothing")
				return
			}
			var warning map[string]any
			require.NoError(t, json.Unmarshal(logs.Bytes(), &warning), "one warning: %s", logs.String())
			assert.Equal(t, map[string]any{"lines": float64(skipped.Lines), "first": skipped.Path, "offset": float64(skipped.Offset),
				"bytes": float64(skipped.Size), "why": skipped.Why}, map[string]any{"lines": warning["lines"], "first": warning["first"],
				"offset": warning["offset"], "bytes": warning["bytes"], "why": warning["why"]}, "Tail logs the first line Read skipped")
		})
	}
}
