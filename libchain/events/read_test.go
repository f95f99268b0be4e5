package events

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestReadSurvivesAnyLine: a 40 MB line, junk, JSON of another shape
// and torn lines are skipped and counted, the ops around them are read, and
// the 40 MB line never sits in memory whole.
func TestReadSurvivesAnyLine(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	op := func(i int) []byte {
		b, err := json.Marshal(Op{Verb: "ADD", Start: t0.Add(time.Duration(i) * time.Minute), Outcome: "ok"})
		require.NoError(t, err)
		return append(b, '\n')
	}
	var rotated, current bytes.Buffer
	rotated.Write(op(0))
	rotated.WriteString(`{"verb":"ADD","sta`) // torn: the next append joins its line
	rotated.Write(op(1))
	rotated.Write(op(1))
	current.Write(op(2))
	current.WriteString(strings.Repeat("x", 40<<20) + "\n")
	current.WriteString("[1,2]\n\"str\"\n\x00\x01\xfe\xff\n")
	current.Write(op(3))
	current.WriteString(`{"verb":"DEL"`)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, dirName), 0o700))
	require.NoError(t, os.WriteFile(Path(dir)+".1", rotated.Bytes(), 0o600))
	require.NoError(t, os.WriteFile(Path(dir), current.Bytes(), 0o600))
	current.Reset()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ops, skipped, err := Read(afero.NewOsFs(), dir, t0.Add(time.Minute))
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	assert.Equal(t, 6, skipped.Lines, "the torn line, the 40 MB line, [1,2], \"str\", junk, the torn last line")
	first := len(op(0))
	assert.Equal(t, Skipped{Lines: 6, Path: Path(dir) + ".1", Offset: int64(first), Size: int64(len(`{"verb":"ADD","sta`) + len(op(1))),
		Why: "not the JSON of an operation"}, skipped, "the first is the torn line")
	require.Len(t, ops, 3, "op 1 (its second copy), 2 and 3: op 0 is before since")
	for i, o := range ops {
		assert.Equal(t, t0.Add(time.Duration(i+1)*time.Minute), o.Start)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d bytes reading a journal with a 40 MB line", alloc)
	assert.Less(t, alloc, uint64(4*MaxLine), "a line is read up to MaxLine, the rest discarded")
}

func TestReadRefusesWhatIsNotAJournal(t *testing.T) {
	tests := []struct {
		name    string
		plant   func(t *testing.T, path string)
		wantErr string
	}{
		{"symlink", func(t *testing.T, path string) {
			target := filepath.Join(t.TempDir(), "elsewhere")
			require.NoError(t, os.WriteFile(target, []byte(`{"verb":"ADD"}`+"\n"), 0o600))
			require.NoError(t, os.Symlink(target, path))
		}, "is a symlink"},
		{"fifo", func(t *testing.T, path string) {
			require.NoError(t, unix.Mkfifo(path, 0o600))
		}, "is not a regular file"},
		{"directory", func(t *testing.T, path string) {
			require.NoError(t, os.Mkdir(path, 0o700))
		}, "is not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.MkdirAll(filepath.Join(dir, dirName), 0o700))
			tt.plant(t, Path(dir))
			_, _, err := Read(afero.NewOsFs(), dir, time.Time{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), Path(dir)+": "+tt.wantErr)
		})
	}
	t.Run("no journal", func(t *testing.T) {
		ops, skipped, err := Read(afero.NewMemMapFs(), "/cache", time.Time{})
		require.NoError(t, err)
		assert.Empty(t, ops)
		assert.Zero(t, skipped)
	})
}
