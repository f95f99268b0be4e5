package cache

import (
	"bytes"
	"syscall"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache/faultfs"
	"github.com/catena-cni/catena/fileutil"
)

var deltaPrefix = []byte(`{"schema":2,`)

// lineKinds says, per entry, "S" for a snapshot and "D" for a delta.
func lineKinds(data []byte) string {
	var kinds []byte
	for _, line := range bytes.SplitAfter(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		if bytes.HasPrefix(line, deltaPrefix) {
			kinds = append(kinds, 'D')
		} else {
			kinds = append(kinds, 'S')
		}
	}
	return string(kinds)
}

// saveSteps saves rec once per step, moving that step from pending to
// added as an ADD does, and returns the encoding of each saved state.
func saveSteps(t *testing.T, s *DiskStore, rec *Record) [][]byte {
	t.Helper()
	for i := range rec.Steps {
		rec.Steps[i].State = StepPending
	}
	rec.Phase = PhaseAdding
	require.NoError(t, s.Save(rec))
	states := [][]byte{mustEncode(t, rec)}
	for i := range rec.Steps {
		rec.Steps[i].State = StepAdded
		require.NoError(t, s.Save(rec))
		states = append(states, mustEncode(t, rec))
	}
	return states
}

func TestDeltaRecordFileReplays(t *testing.T) {
	forEachFs(t, func(t *testing.T, e storeEnv) {
		key := testKey("d1")
		rec := sampleRecord(key)
		states := saveSteps(t, e.store, rec)
		rec.Phase = PhaseComplete
		rec.TeardownAttempts = 7
		require.NoError(t, e.store.Save(rec))
		states = append(states, mustEncode(t, rec))

		data := readRecordFile(t, e, key)
		assert.Equal(t, "SDDDD", lineKinds(data), "one snapshot, then a delta per save")
		lines := bytes.SplitAfter(data, []byte("\n"))
		assert.Less(t, len(lines[1]), len(lines[0])*2/3, "a delta of one step is smaller than the snapshot")

		// Every prefix of whole lines replays to the state of its last save.
		end := 0
		for i, want := range states {
			end += len(lines[i])
			got, err := decodeRecordFile(data[:end])
			require.NoError(t, err, "after %d lines", i+1)
			assert.Equal(t, string(want), string(mustEncode(t, got)), "after %d lines", i+1)
		}
		got, err := e.store.Load(key)
		require.NoError(t, err)
		assert.Equal(t, 7, got.TeardownAttempts)
		assert.Equal(t, PhaseComplete, got.Phase)
	})
}

func TestDeltaTornFinalLineIgnored(t *testing.T) {
	forEachFs(t, func(t *testing.T, e storeEnv) {
		key := testKey("d2")
		states := saveSteps(t, e.store, sampleRecord(key))
		data := readRecordFile(t, e, key)
		require.Equal(t, "SDDD", lineKinds(data))
		lastStart := bytes.LastIndexByte(data[:len(data)-1], '\n') + 1
		for n := lastStart; n <= len(data); n++ {
			writeRecordFile(t, e, key, data[:n])
			got, err := e.store.Load(key)
			require.NoError(t, err, "torn at %d", n)
			want := states[len(states)-2]
			if n >= len(data)-1 { // the newline is not needed to verify
				want = states[len(states)-1]
			}
			assert.Equal(t, string(want), string(mustEncode(t, got)), "torn at %d", n)
		}
	})
}

func TestDeltaRecordFileRejects(t *testing.T) {
	e := storeEnvs(t)["memmapfs"](t)
	key := testKey("d3")
	saveSteps(t, e.store, sampleRecord(key))
	data := readRecordFile(t, e, key)
	require.Equal(t, "SDDD", lineKinds(data))
	lines := bytes.SplitAfter(data, []byte("\n"))[:4]
	join := func(ls ...[]byte) []byte { return bytes.Join(ls, nil) }

	flipped := bytes.Clone(lines[2])
	flipped[len(flipped)/2] ^= 0x01
	torn := lines[2][:len(lines[2])/2]
	other := sampleRecord(key)
	other.Steps = other.Steps[:2]
	shorter := mustEncode(t, other)
	otherKey := sampleRecord(testKey("d3other"))
	tests := map[string][]byte{
		"corrupt middle delta":      join(lines[0], lines[1], flipped, lines[3]),
		"torn middle delta":         join(lines[0], lines[1], torn, lines[3]),
		"delta first":               join(lines[1], lines[2], lines[3]),
		"only a delta":              lines[3],
		"delta on other step count": join(shorter, lines[3]),
		"delta on another record":   join(mustEncode(t, otherKey), lines[3]),
		"whole final delta damaged": join(lines[0], lines[1], lines[2], flipped),
	}
	for name, file := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := decodeRecordFile(file)
			require.ErrorIs(t, err, ErrCorrupt)
			assert.Nil(t, got)
		})
	}
}

// TestDeltaNeverAfterAnotherWriter: a store writes a delta only on the file
// exactly as it last wrote it; after another process (here a second
// DiskStore on the same dir) appended to or replaced the file, it writes a
// full snapshot, and what it saved is what loads.
func TestDeltaNeverAfterAnotherWriter(t *testing.T) {
	forEachFs(t, func(t *testing.T, e storeEnv) {
		other := NewDiskStore(e.fs, e.dir, NewMemLocker())
		key := testKey("d4")
		rec := sampleRecord(key)
		require.NoError(t, e.store.Save(rec))
		rec.TeardownAttempts = 1
		require.NoError(t, e.store.Save(rec))
		require.Equal(t, "SD", lineKinds(readRecordFile(t, e, key)))

		// The other writer appends its own state (a full snapshot: it
		// has written nothing of this record).
		theirs := sampleRecord(key)
		theirs.Steps[1].State = StepDelFailed
		theirs.TeardownAttempts = 2
		require.NoError(t, other.Save(theirs))
		require.Equal(t, "SDS", lineKinds(readRecordFile(t, e, key)))

		// A delta from e.store would not carry step 1 and would put back
		// its own view on top of theirs; it must write a snapshot.
		rec.TeardownAttempts = 3
		require.NoError(t, e.store.Save(rec))
		assert.Equal(t, "SDSS", lineKinds(readRecordFile(t, e, key)))
		got, err := e.store.Load(key)
		require.NoError(t, err)
		assert.Equal(t, string(mustEncode(t, rec)), string(mustEncode(t, got)))

		// A replace by another writer, to the same bytes and size: still
		// a snapshot from e.store.
		rec.TeardownAttempts = 4
		require.NoError(t, e.store.Save(rec))
		require.Equal(t, "SDSSD", lineKinds(readRecordFile(t, e, key)))
		same := readRecordFile(t, e, key)
		_, err = fileutil.WriteFileDurableInfo(e.fs, e.store.Path(key), same)
		require.NoError(t, err)
		rec.TeardownAttempts = 5
		require.NoError(t, e.store.Save(rec))
		assert.Equal(t, "SDSSDS", lineKinds(readRecordFile(t, e, key)))
		got, err = e.store.Load(key)
		require.NoError(t, err)
		assert.Equal(t, 5, got.TeardownAttempts)

		// A changed step count is a snapshot too; then deltas resume.
		rec.Steps = rec.Steps[:2]
		require.NoError(t, e.store.Save(rec))
		rec.TeardownAttempts = 6
		require.NoError(t, e.store.Save(rec))
		assert.Equal(t, "SDSSDSSD", lineKinds(readRecordFile(t, e, key)))
		got, err = e.store.Load(key)
		require.NoError(t, err)
		assert.Equal(t, string(mustEncode(t, rec)), string(mustEncode(t, got)))
	})
}

// TestDeltaForgottenAfterRemove: a record removed and saved again starts
// with a snapshot, whatever the store remembers.
func TestDeltaForgottenAfterRemove(t *testing.T) {
	forEachFs(t, func(t *testing.T, e storeEnv) {
		key := testKey("d5")
		rec := sampleRecord(key)
		require.NoError(t, e.store.Save(rec))
		require.NoError(t, e.store.Remove(key))
		require.NoError(t, e.store.Save(rec))
		rec.TeardownAttempts = 1
		require.NoError(t, e.store.Save(rec))
		assert.Equal(t, "SD", lineKinds(readRecordFile(t, e, key)))
	})
}

// TestDeltaAfterFailedSave: a Save whose append fails leaves the record file
// with an entry that may or may not be durable; the next Save writes a full
// snapshot, and what loads is what it saved.
func TestDeltaAfterFailedSave(t *testing.T) {
	fsys := faultfs.New(afero.NewMemMapFs())
	s := NewDiskStore(fsys, "/var/lib/catena", NewMemLocker())
	e := storeEnv{fs: fsys, dir: "/var/lib/catena", store: s}
	key := testKey("d6")
	rec := sampleRecord(key)
	require.NoError(t, s.Save(rec))
	rec.TeardownAttempts = 1
	require.NoError(t, s.Save(rec))
	require.Equal(t, "SD", lineKinds(readRecordFile(t, e, key)))

	fsys.ResetCounts()
	fsys.Inject(faultfs.Fault{Op: faultfs.OpSync, N: 1, Err: syscall.EIO})
	rec.TeardownAttempts = 2
	require.ErrorIs(t, s.Save(rec), syscall.EIO)
	fsys.Heal()
	require.Equal(t, "SDD", lineKinds(readRecordFile(t, e, key)), "the failed delta was written whole")

	rec.TeardownAttempts = 3
	require.NoError(t, s.Save(rec))
	assert.Equal(t, "SDDS", lineKinds(readRecordFile(t, e, key)))
	got, err := s.Load(key)
	require.NoError(t, err)
	assert.Equal(t, string(mustEncode(t, rec)), string(mustEncode(t, got)))
}

// TestDeltaNeverAfterAnInPlaceWriter: another writer's entry written in
// place changes neither the file's size nor, within the clock's
// granularity, its mtime (set back here to make it so); it still moves the
// end of the entries, and the next Save of this store writes a snapshot,
// not a delta on a state it did not write.
func TestDeltaNeverAfterAnInPlaceWriter(t *testing.T) {
	forEachFs(t, func(t *testing.T, e storeEnv) {
		other := NewDiskStore(e.fs, e.dir, NewMemLocker())
		key := testKey("d7")
		rec := sampleRecord(key)
		require.NoError(t, e.store.Save(rec))
		rec.TeardownAttempts = 1
		require.NoError(t, e.store.Save(rec))
		path := e.store.Path(key)
		before, err := e.fs.Stat(path)
		require.NoError(t, err)

		theirs := sampleRecord(key)
		theirs.Steps[1].State = StepDelFailed
		require.NoError(t, other.Save(theirs))
		after, err := e.fs.Stat(path)
		require.NoError(t, err)
		require.Equal(t, before.Size(), after.Size(), "written in place")
		require.NoError(t, e.fs.Chtimes(path, before.ModTime(), before.ModTime()))
		require.Equal(t, "SDS", lineKinds(readRecordFile(t, e, key)))

		rec.TeardownAttempts = 2
		require.NoError(t, e.store.Save(rec))
		assert.Equal(t, "SDSS", lineKinds(readRecordFile(t, e, key)))
		got, err := e.store.Load(key)
		require.NoError(t, err)
		assert.Equal(t, string(mustEncode(t, rec)), string(mustEncode(t, got)))
	})
}
