package cache

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/fileutil"
)

func TestSweepTemps(t *testing.T) {
	old := time.Now().Add(-time.Hour)
	tests := []struct {
		name    string
		file    string // in records/podnet
		mtime   time.Time
		lock    bool // the attachment's lock is held
		removed bool
	}{
		{name: "old temp of a free attachment", file: ".c1:eth0.json.tmp", mtime: old, removed: true},
		{name: "young temp", file: ".c1:eth0.json.tmp", mtime: time.Now()},
		{name: "old temp of a locked attachment", file: ".c1:eth0.json.tmp", mtime: old, lock: true},
		{name: "record", file: "c1:eth0.json", mtime: old},
		{name: "temp with an invalid key", file: ".-bad:eth0.json.tmp", mtime: old},
		{name: "other hidden file", file: ".c1:eth0.json.keep", mtime: old},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachFs(t, func(t *testing.T, e storeEnv) {
				dir := filepath.Join(e.dir, "records", "podnet")
				require.NoError(t, e.fs.MkdirAll(dir, 0o700))
				path := filepath.Join(dir, tt.file)
				require.NoError(t, afero.WriteFile(e.fs, path, []byte("torn"), 0o600))
				require.NoError(t, e.fs.Chtimes(path, tt.mtime, tt.mtime))
				if tt.lock {
					u, err := e.store.TryLock(testKey("c1"), Holder{PID: 1, Verb: "ADD"})
					require.NoError(t, err)
					t.Cleanup(func() { _ = u.Unlock() })
				}
				swept, err := e.store.SweepTemps("podnet", time.Now().Add(-time.Minute))
				require.NoError(t, err)
				_, statErr := e.fs.Stat(path)
				if tt.removed {
					assert.Equal(t, []string{path}, swept)
					assert.ErrorIs(t, statErr, os.ErrNotExist)
				} else {
					assert.Empty(t, swept)
					assert.NoError(t, statErr)
				}
			})
		})
	}
}

func TestSweepTempsMissingNetworkDir(t *testing.T) {
	forEachFs(t, func(t *testing.T, e storeEnv) {
		swept, err := e.store.SweepTemps("nonet", time.Now())
		require.NoError(t, err)
		assert.Empty(t, swept)
	})
}

// A crash between creating the temp file and the rename leaves it; the
// next Save of the same record replaces it, and Remove unlinks it.
func TestTempFileOfACrashedWrite(t *testing.T) {
	forEachFs(t, func(t *testing.T, e storeEnv) {
		key := testKey("c1")
		tmp := fileutil.TempPath(e.store.recordPath(key))
		require.NoError(t, e.fs.MkdirAll(filepath.Dir(tmp), 0o700))
		require.NoError(t, afero.WriteFile(e.fs, tmp, []byte("torn"), 0o600))
		require.NoError(t, e.store.Save(sampleRecord(key)))
		_, err := e.fs.Stat(tmp)
		assert.ErrorIs(t, err, os.ErrNotExist, "Save renamed its own temp file over the record")

		require.NoError(t, afero.WriteFile(e.fs, tmp, []byte("torn"), 0o600))
		require.NoError(t, e.store.Remove(key))
		_, err = e.fs.Stat(tmp)
		assert.ErrorIs(t, err, os.ErrNotExist, "Remove unlinks the temp file")
	})
}

// A symlink planted at the temp name is replaced, never followed.
func TestTempSymlinkNotFollowed(t *testing.T) {
	dir := t.TempDir()
	fsys := afero.NewOsFs()
	s := NewDiskStore(fsys, filepath.Join(dir, "catena"), NewMemLocker())
	key := testKey("c1")
	tmp := fileutil.TempPath(s.recordPath(key))
	require.NoError(t, os.MkdirAll(filepath.Dir(tmp), 0o700))
	victim := filepath.Join(dir, "victim")
	require.NoError(t, os.WriteFile(victim, []byte("precious"), 0o600)) // test fixture, not state
	require.NoError(t, os.Symlink(victim, tmp))
	require.NoError(t, s.Save(sampleRecord(key)))
	data, err := os.ReadFile(victim)
	require.NoError(t, err)
	assert.Equal(t, "precious", string(data))
	_, err = s.Load(key)
	require.NoError(t, err)
}

func TestSweepTempsRejectsAnEscapingNetwork(t *testing.T) {
	forEachFs(t, func(t *testing.T, e storeEnv) {
		_, err := e.store.SweepTemps("../..", time.Now())
		require.Error(t, err)
	})
}
