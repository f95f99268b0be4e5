package cache

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readRecordFile returns the entries of key's record file, without the zeros that
// preallocate it (recordfile_slot.go).
func readRecordFile(t *testing.T, e storeEnv, key Key) []byte {
	t.Helper()
	data, err := afero.ReadFile(e.fs, e.store.Path(key))
	require.NoError(t, err)
	entries, err := unpad(data)
	require.NoError(t, err)
	return entries
}

func writeRecordFile(t *testing.T, e storeEnv, key Key, data []byte) {
	t.Helper()
	f, err := e.fs.OpenFile(e.store.Path(key), os.O_WRONLY|os.O_TRUNC, filePerm)
	require.NoError(t, err)
	_, err = f.Write(data)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func TestRecordFileAppendsAndLoadsNewest(t *testing.T) {
	forEachFs(t, func(t *testing.T, e storeEnv) {
		key := testKey("j1")
		rec := sampleRecord(key)
		for i := range 4 {
			rec.TeardownAttempts = i
			require.NoError(t, e.store.Save(rec))
		}
		data := readRecordFile(t, e, key)
		assert.Equal(t, 4, bytes.Count(data, []byte("\n")), "one line per save")
		got, err := e.store.Load(key)
		require.NoError(t, err)
		assert.Equal(t, 3, got.TeardownAttempts)
	})
}

func TestRecordFileTornTail(t *testing.T) {
	forEachFs(t, func(t *testing.T, e storeEnv) {
		key := testKey("j2")
		rec := sampleRecord(key)
		rec.TeardownAttempts = 1
		require.NoError(t, e.store.Save(rec))
		first := readRecordFile(t, e, key)
		rec.TeardownAttempts = 2
		require.NoError(t, e.store.Save(rec))
		full := readRecordFile(t, e, key)
		second := full[len(first):]

		// A crash at any byte of the second append: Load gives the first
		// entry, or the second once it is complete.
		for n := 0; n <= len(second); n++ {
			writeRecordFile(t, e, key, append(append([]byte(nil), first...), second[:n]...))
			got, err := e.store.Load(key)
			require.NoError(t, err, "torn at %d", n)
			want := 1
			if n >= len(second)-1 { // the newline is not needed to verify
				want = 2
			}
			assert.Equal(t, want, got.TeardownAttempts, "torn at %d", n)
		}

		// The next Save after a torn tail compacts instead of appending to
		// the partial line.
		writeRecordFile(t, e, key, append(append([]byte(nil), first...), second[:len(second)/2]...))
		rec.TeardownAttempts = 3
		require.NoError(t, e.store.Save(rec))
		data := readRecordFile(t, e, key)
		assert.Equal(t, 1, bytes.Count(data, []byte("\n")), "compacted to the new entry alone")
		got, err := e.store.Load(key)
		require.NoError(t, err)
		assert.Equal(t, 3, got.TeardownAttempts)
	})
}

func TestRecordFileCompactsWhenLarge(t *testing.T) {
	forEachFs(t, func(t *testing.T, e storeEnv) {
		key := testKey("j3")
		rec := sampleRecord(key)
		for i := range 200 {
			rec.TeardownAttempts = i
			require.NoError(t, e.store.Save(rec))
		}
		data := readRecordFile(t, e, key)
		assert.Less(t, len(data), compactAt+4096, "the record file stays bounded")
		got, err := e.store.Load(key)
		require.NoError(t, err)
		assert.Equal(t, 199, got.TeardownAttempts)
	})
}

func TestRecordFileRejects(t *testing.T) {
	key := testKey("j4")
	good, err := Encode(sampleRecord(key))
	require.NoError(t, err)
	future := bytes.Replace(good, []byte(`{"schema":1,`), []byte(`{"schema":9,`), 1)
	tests := []struct {
		name   string
		data   []byte
		future bool
	}{
		{name: "only entry torn", data: good[:len(good)/2]},
		{name: "two bad entries", data: []byte("garbage\nmore garbage\n")},
		{name: "future schema is never skipped", data: append(append([]byte(nil), good...), future...), future: true},
		{name: "bad entry before a torn tail", data: append([]byte("garbage\n"), good[:10]...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeRecordFile(tc.data)
			require.ErrorIs(t, err, ErrCorrupt)
			assert.Equal(t, tc.future, strings.Contains(err.Error(), "schema 9"), err.Error())
			if tc.future {
				require.ErrorIs(t, err, ErrFutureSchema)
			}
		})
	}
}
