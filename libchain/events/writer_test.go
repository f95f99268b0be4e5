package events

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/fileutil"
)

// TestAppendRead: Append writes operations that Read gives back from
// their start on, in a file only Catena can read, on the filesystem it is
// given: none (the OS's), the TrustedFs a catena process builds once for
// its cache dir, or the tests' in-memory one.
func TestAppendRead(t *testing.T) {
	tests := []struct {
		name string
		fs   func(dir string) (write, read afero.Fs) // what the Writer is given, what Read reads
	}{
		{"the OS's", func(string) (afero.Fs, afero.Fs) { return nil, afero.NewOsFs() }},
		{"a TrustedFs", func(dir string) (afero.Fs, afero.Fs) {
			return fileutil.TrustedFs(afero.NewOsFs(), dir), afero.NewOsFs()
		}},
		{"in memory", func(string) (afero.Fs, afero.Fs) { m := afero.NewMemMapFs(); return m, m }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write, read := tt.fs(dir)
			j := &Writer{CacheDir: dir, Fs: write}
			t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
			for i := range 3 {
				require.NoError(t, j.Append(Op{Verb: "ADD", Attachment: "n/c/eth0", Start: t0.Add(time.Duration(i) * time.Minute), Outcome: "ok",
					Calls: []OpCall{{Index: 0, Type: "bridge", Verb: "ADD", Duration: time.Millisecond}}}))
			}
			ops, skipped, err := Read(read, dir, t0.Add(time.Minute))
			require.NoError(t, err)
			assert.Zero(t, skipped)
			require.Len(t, ops, 2)
			assert.Equal(t, "bridge", ops[0].Calls[0].Type)
			assert.Equal(t, time.Millisecond, ops[0].Calls[0].Duration)
			fi, err := read.Stat(Path(dir))
			require.NoError(t, err)
			assert.Equal(t, "-rw-------", fi.Mode().Perm().String())
		})
	}
}

// TestAppendRotates: the journal rotates to .1 once full, and Read
// reads both files, the rotated one first.
func TestAppendRotates(t *testing.T) {
	dir := t.TempDir()
	j := &Writer{CacheDir: dir}
	big := strings.Repeat("x", 60<<10) // a line short of MaxLine
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	for i := range 80 {
		require.NoError(t, j.Append(Op{Verb: "DEL", Start: t0.Add(time.Duration(i) * time.Second), Error: big}))
	}
	main, err := os.Stat(Path(dir))
	require.NoError(t, err)
	rotated, err := os.Stat(Path(dir) + ".1")
	require.NoError(t, err)
	assert.Less(t, main.Size(), int64(rotateSize))
	assert.GreaterOrEqual(t, rotated.Size(), int64(rotateSize))
	ops, skipped, err := Read(afero.NewOsFs(), dir, time.Time{})
	require.NoError(t, err)
	assert.Zero(t, skipped, "60 KiB lines are read")
	require.Len(t, ops, 80, "rotation loses nothing")
	assert.Equal(t, big, ops[79].Error, "nor cuts anything")
	assert.Equal(t, t0, ops[0].Start, "the rotated file is read first")
}
