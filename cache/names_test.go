//go:build linux

package cache

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/fileutil"
)

// TestLongKeysOnDisk: keys whose container ID or network name is longer
// than a file name work end to end on the real disk: record, lock,
// teardown index, list, temp sweep and quarantine, each under a
// fixed-length hashed name, with the full key read back from the record.
func TestLongKeysOnDisk(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	tests := []struct {
		name string
		key  Key
	}{
		{"short", Key{Network: "podnet", ContainerID: "c1", IfName: "eth0"}},
		{"longest plain", Key{Network: "podnet", ContainerID: long(maxPlainBase - len(":eth0")), IfName: "eth0"}},
		{"300-byte ID", Key{Network: "podnet", ContainerID: long(300), IfName: "eth0"}},
		{"1000-byte ID", Key{Network: "podnet", ContainerID: long(1000), IfName: "eth0"}},
		{"300-byte network", Key{Network: "n" + long(299), ContainerID: "c1", IfName: "eth0"}},
		{"long network and ID", Key{Network: "n" + long(999), ContainerID: long(5000), IfName: "eth0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "catena")
			locker := NewFlockLocker(filepath.Join(dir, LocksDir))
			s := NewDiskStore(afero.NewOsFs(), dir, locker)
			key := tt.key
			hashed := len(key.ContainerID)+1+len(key.IfName) > maxPlainBase
			if hashed {
				assert.Regexp(t, `^h-[0-9a-f]{64}\.json$`, filepath.Base(s.Path(key)))
			} else {
				assert.Equal(t, key.ContainerID+":"+key.IfName+".json", filepath.Base(s.Path(key)), "names that fit are unchanged")
			}

			_, err := s.Load(key)
			require.ErrorIs(t, err, ErrNotFound)
			u, err := s.Lock(t.Context(), key, Holder{Verb: "ADD"})
			require.NoError(t, err)
			data, err := os.ReadFile(locker.Path(key))
			require.NoError(t, err)
			assert.Contains(t, string(data), key.ContainerID, "the lock file holds the full key")
			require.NoError(t, s.Save(sampleRecord(key)))
			require.NoError(t, s.Save(sampleRecord(key)), "an append")
			rec, err := s.Load(key)
			require.NoError(t, err)
			assert.Equal(t, key, rec.Key)
			require.NoError(t, u.Unlock())

			keys, err := s.List()
			require.NoError(t, err)
			assert.Equal(t, []Key{key}, keys)
			require.NoError(t, s.NotePending(key, PendingNote{}))
			pend, err := s.PendingTeardown(key.Network, 5)
			require.NoError(t, err)
			require.Len(t, pend, 1)
			assert.Equal(t, key, pend[0].Key)
			require.NoError(t, s.ClearPending(key))

			// a temp file that a crash left, swept by its key's lock
			tmp := fileutil.TempPath(s.Path(key))
			require.NoError(t, os.WriteFile(tmp, mustEncode(t, sampleRecord(key)), 0o600))
			swept, err := s.SweepTemps(key.Network, time.Now().Add(time.Hour))
			require.NoError(t, err)
			assert.Equal(t, []string{tmp}, swept)

			require.NoError(t, os.WriteFile(s.Path(key), []byte("corrupt"), 0o600))
			_, err = s.Load(key)
			require.ErrorIs(t, err, ErrCorrupt)
			q, err := s.Quarantine(key)
			require.NoError(t, err)
			assert.LessOrEqual(t, len(filepath.Base(q)), nameMax)
			require.NoError(t, s.Remove(key))
			require.NoError(t, s.Probe())
		})
	}
}

// TestHashedNamesAreChecked: a record under a hashed name that holds
// another key (a copy, or a collision) is neither listed nor loaded as the
// key of the name.
func TestHashedNamesAreChecked(t *testing.T) {
	fsys := afero.NewMemMapFs()
	s := NewDiskStore(fsys, "/c", NewMemLocker())
	a := Key{Network: "podnet", ContainerID: strings.Repeat("a", 300), IfName: "eth0"}
	b := Key{Network: "podnet", ContainerID: strings.Repeat("b", 300), IfName: "eth0"}
	require.NoError(t, s.Save(sampleRecord(b)))
	data, err := afero.ReadFile(fsys, s.Path(b))
	require.NoError(t, err)
	require.NoError(t, afero.WriteFile(fsys, s.Path(a), data, 0o600)) // b's record under a's name

	keys, err := s.List()
	require.NoError(t, err)
	assert.Equal(t, []Key{b}, keys, "a's name does not list as b, nor as a")
	_, err = s.Load(a)
	assert.ErrorIs(t, err, ErrCorrupt, "a's name holds another key")
	require.NoError(t, afero.WriteFile(fsys, filepath.Join("/c", pendingDir, "podnet", keyName(a)), nil, 0o600))
	pend, err := s.PendingTeardown("podnet", 5)
	require.NoError(t, err)
	assert.Empty(t, pend, "a pending marker whose record names another key is skipped")
}

// TestSaveNeverWritesWhatLoadRefuses: a record
// larger than Load accepts is refused with ErrTooLarge and nothing is
// written; one that fits, appended to a record file that it would take past
// the limit, compacts it instead, so that it loads back.
func TestSaveNeverWritesWhatLoadRefuses(t *testing.T) {
	// Save sets Updated to the time now, whose RFC 3339 fraction is
	// 0 to 9 digits long (trailing zeros are dropped): sized encodes with a
	// full 9-digit fraction, so what Save writes is n minus up to 10 bytes,
	// and "over" must be over by more than that.
	sized := func(key Key, n int) *Record {
		rec := sampleRecord(key)
		rec.Updated = time.Date(2026, 11, 23, 10, 0, 0, 123456789, time.UTC)
		rec.AddError = ""
		base := len(mustEncode(t, rec)) + len(`,"addError":""`)
		rec.AddError = strings.Repeat("x", n-base)
		require.Len(t, mustEncode(t, rec), n)
		return rec
	}
	tests := []struct {
		name    string
		size    int
		wantErr error
	}{
		{"exactly the limit", maxRecordSize, nil},
		{"just over, whatever the time's width", maxRecordSize + 11, ErrTooLarge},
		{"twice the limit", 2 * maxRecordSize, ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newOsStore(t)
			key := testKey("big")
			small := sampleRecord(key)
			require.NoError(t, s.Save(small))
			before, err := os.ReadFile(s.Path(key))
			require.NoError(t, err)

			err = s.Save(sized(key, tt.size))
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Contains(t, err.Error(), "Load accepts at most")
				after, err := os.ReadFile(s.Path(key))
				require.NoError(t, err)
				assert.Equal(t, before, after, "nothing was written")
				_, err = s.Load(key)
				require.NoError(t, err, "the previous record still loads")
				return
			}
			require.NoError(t, err)
			fi, err := os.Stat(s.Path(key))
			require.NoError(t, err)
			assert.LessOrEqual(t, fi.Size(), int64(maxRecordSize))
			rec, err := s.Load(key)
			require.NoError(t, err, "what Save wrote, Load reads")
			assert.Len(t, rec.AddError, len(sized(key, tt.size).AddError))
			require.False(t, errors.Is(err, ErrCorrupt))
		})
	}
}
