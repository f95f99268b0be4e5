package journal

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestReadLines(t *testing.T) {
	type line struct {
		text    string
		tooLong bool
	}
	tests := []struct {
		name string
		in   string
		want []line
	}{
		{"empty", "", nil},
		{"lines", "a\nbb\n", []line{{"a", false}, {"bb", false}}},
		{"empty lines ignored", "\n\na\n\n", []line{{"a", false}}},
		{"torn last line", "a\nbc", []line{{"a", false}, {"bc", false}}},
		{"exactly max", "12345678\nx\n", []line{{"12345678", false}, {"x", false}}},
		{"one over max, then on", "123456789\nx\n", []line{{"", true}, {"x", false}}},
		{"long torn last line", "a\n" + strings.Repeat("y", 100), []line{{"a", false}, {"", true}}},
		{"binary", "\x00\xff\x1b\r\n", []line{{"\x00\xff\x1b\r", false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tt.in), iotest.OneByteReader(strings.NewReader(tt.in))} {
				var got []line
				require.NoError(t, readLines(r, 8, func(l []byte, tooLong bool) { got = append(got, line{string(l), tooLong}) }))
				assert.Equal(t, tt.want, got)
			}
		})
	}
	t.Run("read error", func(t *testing.T) {
		err := readLines(iotest.TimeoutReader(strings.NewReader(strings.Repeat("z", 70<<10))), 8, func([]byte, bool) {})
		assert.ErrorIs(t, err, iotest.ErrTimeout)
	})
}

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
	assert.Equal(t, 6, skipped, "the torn line, the 40 MB line, [1,2], \"str\", junk, the torn last line")
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
