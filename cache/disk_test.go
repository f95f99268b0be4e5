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
)

type storeEnv struct {
	fs    afero.Fs
	dir   string
	store *DiskStore
}

// storeEnvs returns a fresh store on each filesystem the store must support.
func storeEnvs(t *testing.T) map[string]func(t *testing.T) storeEnv {
	return map[string]func(t *testing.T) storeEnv{
		"memmapfs": func(t *testing.T) storeEnv {
			fs := afero.NewMemMapFs()
			return storeEnv{fs: fs, dir: "/var/lib/catena", store: NewDiskStore(fs, "/var/lib/catena", NewMemLocker())}
		},
		"osfs": func(t *testing.T) storeEnv {
			fs := afero.NewOsFs()
			dir := filepath.Join(t.TempDir(), "catena")
			return storeEnv{fs: fs, dir: dir, store: NewDiskStore(fs, dir, NewMemLocker())}
		},
	}
}

func forEachFs(t *testing.T, test func(t *testing.T, e storeEnv)) {
	for name, mk := range storeEnvs(t) {
		t.Run(name, func(t *testing.T) { test(t, mk(t)) })
	}
}

func TestDiskStoreSaveLoadRemove(t *testing.T) {
	forEachFs(t, func(t *testing.T, e storeEnv) {
		s := e.store
		key := testKey("abc123")
		_, err := s.Load(key)
		require.ErrorIs(t, err, ErrNotFound)
		assert.Contains(t, err.Error(), key.String())

		rec := sampleRecord(key)
		before := time.Now().UTC()
		require.NoError(t, s.Save(rec))
		assert.Equal(t, SchemaVersion, rec.Schema)
		assert.False(t, rec.Updated.Before(before), "Save sets Updated")
		assert.Equal(t, filepath.Join(e.dir, "records", "podnet", "abc123:eth0.json"), s.Path(key))

		got, err := s.Load(key)
		require.NoError(t, err)
		assert.Equal(t, rec, got)

		// Replace.
		rec.Phase = PhaseTearingDown
		rec.Steps[2].State = StepDeleted
		require.NoError(t, s.Save(rec))
		got, err = s.Load(key)
		require.NoError(t, err)
		assert.Equal(t, PhaseTearingDown, got.Phase)
		assert.Equal(t, StepDeleted, got.Steps[2].State)

		names, err := afero.ReadDir(e.fs, filepath.Dir(s.Path(key)))
		require.NoError(t, err)
		require.Len(t, names, 1, "no temp file is left behind")

		require.NoError(t, s.Remove(key))
		_, err = s.Load(key)
		require.ErrorIs(t, err, ErrNotFound)
		require.NoError(t, s.Remove(key), "removing a missing record is not an error")
		require.NoError(t, s.Remove(Key{Network: "other", ContainerID: "x", IfName: "eth0"}))
	})
}

func TestDiskStoreList(t *testing.T) {
	forEachFs(t, func(t *testing.T, e storeEnv) {
		s := e.store
		keys, err := s.List()
		require.NoError(t, err)
		assert.Empty(t, keys, "an empty store lists nothing")

		want := []Key{
			{Network: "podnet", ContainerID: "c1", IfName: "eth0"},
			{Network: "podnet", ContainerID: "c1", IfName: "net1"},
			{Network: "podnet", ContainerID: "c2", IfName: "x.json"},
			{Network: "other-net", ContainerID: "c1", IfName: "eth0"},
		}
		for _, k := range want {
			require.NoError(t, s.Save(sampleRecord(k)))
		}
		// Noise that must be skipped.
		recDir := filepath.Join(e.dir, "records", "podnet")
		for _, name := range []string{".c3:eth0.json.0123.tmp", "c4:eth0.json.tmp", "README", "noifname.json", ":eth0.json", "c5:.json", "-bad:eth0.json"} {
			require.NoError(t, afero.WriteFile(e.fs, filepath.Join(recDir, name), []byte("x"), 0o600))
		}
		require.NoError(t, afero.WriteFile(e.fs, filepath.Join(e.dir, "records", "stray-file"), []byte("x"), 0o600))
		require.NoError(t, e.fs.MkdirAll(filepath.Join(e.dir, "records", "_invalid"), 0o700))
		require.NoError(t, afero.WriteFile(e.fs, filepath.Join(e.dir, "records", "_invalid", "c1:eth0.json"), []byte("x"), 0o600))

		keys, err = s.List()
		require.NoError(t, err)
		assert.ElementsMatch(t, want, keys)
	})
}

func TestDiskStoreQuarantine(t *testing.T) {
	forEachFs(t, func(t *testing.T, e storeEnv) {
		s := e.store
		key := testKey("abc")
		path, err := s.Quarantine(key)
		require.NoError(t, err, "quarantining a missing record is not an error")
		assert.Empty(t, path)

		require.NoError(t, s.Save(sampleRecord(key)))
		require.NoError(t, afero.WriteFile(e.fs, s.Path(key), []byte(`{"schema":1,"sha`), 0o600))
		_, err = s.Load(key)
		require.ErrorIs(t, err, ErrCorrupt)

		path, err = s.Quarantine(key)
		require.NoError(t, err)
		assert.Equal(t, filepath.Join(e.dir, "quarantine"), filepath.Dir(path))
		assert.True(t, strings.HasPrefix(filepath.Base(path), "podnet_abc:eth0."), path)
		assert.True(t, strings.HasSuffix(path, ".json"), path)
		data, err := afero.ReadFile(e.fs, path)
		require.NoError(t, err)
		assert.Equal(t, `{"schema":1,"sha`, string(data), "the record is moved, not rewritten")
		_, err = s.Load(key)
		require.ErrorIs(t, err, ErrNotFound)

		// A second quarantine of the same key gets another name.
		require.NoError(t, afero.WriteFile(e.fs, s.Path(key), []byte(`junk`), 0o600))
		path2, err := s.Quarantine(key)
		require.NoError(t, err)
		assert.NotEqual(t, path, path2)
		keys, err := s.List()
		require.NoError(t, err)
		assert.Empty(t, keys)
	})
}

func TestDiskStoreDirectoryWhereRecordShouldBe(t *testing.T) {
	forEachFs(t, func(t *testing.T, e storeEnv) {
		s := e.store
		key := testKey("abc")
		require.NoError(t, e.fs.MkdirAll(filepath.Join(s.Path(key), "inner"), 0o700))
		_, err := s.Load(key)
		require.ErrorIs(t, err, ErrCorrupt)
		assert.Contains(t, err.Error(), "directory")

		keys, err := s.List()
		require.NoError(t, err)
		assert.Equal(t, []Key{key}, keys, "a corrupt entry is listed so it can be quarantined")

		path, err := s.Quarantine(key)
		require.NoError(t, err)
		fi, err := e.fs.Stat(filepath.Join(path, "inner"))
		require.NoError(t, err, "the directory is moved whole")
		assert.True(t, fi.IsDir())
		_, err = s.Load(key)
		require.ErrorIs(t, err, ErrNotFound)
	})
}

func TestDiskStoreRefusesForeignRecord(t *testing.T) {
	forEachFs(t, func(t *testing.T, e storeEnv) {
		s := e.store
		a, b := testKey("aaa"), testKey("bbb")
		require.NoError(t, s.Save(sampleRecord(a)))
		data, err := afero.ReadFile(e.fs, s.Path(a))
		require.NoError(t, err)
		require.NoError(t, afero.WriteFile(e.fs, s.Path(b), data, 0o600))
		_, err = s.Load(b)
		require.ErrorIs(t, err, ErrCorrupt)
		assert.Contains(t, err.Error(), a.String())
	})
}

func TestDiskStoreFutureSchema(t *testing.T) {
	forEachFs(t, func(t *testing.T, e storeEnv) {
		s := e.store
		key := Key{Network: "n", ContainerID: "c", IfName: "eth0"}
		require.NoError(t, s.Save(sampleRecord(key)))
		body := `{"schema":3,"key":{"network":"n","containerID":"c","ifName":"eth0"},"phase":"adding","steps":[]}`
		require.NoError(t, afero.WriteFile(e.fs, s.Path(key), envelopeOf("3", body), 0o600))
		_, err := s.Load(key)
		require.ErrorIs(t, err, ErrCorrupt)
		require.ErrorIs(t, err, ErrFutureSchema)
	})
}

func TestDiskStoreInvalidKeys(t *testing.T) {
	keys := map[string]Key{
		"container ID ../x":  {Network: "podnet", ContainerID: "../x", IfName: "eth0"},
		"container ID empty": {Network: "podnet", ContainerID: "", IfName: "eth0"},
		"ifname a/b":         {Network: "podnet", ContainerID: "c", IfName: "a/b"},
		"ifname ..":          {Network: "podnet", ContainerID: "c", IfName: ".."},
		"ifname with colon":  {Network: "podnet", ContainerID: "c", IfName: "a:b"},
		"network ..":         {Network: "..", ContainerID: "c", IfName: "eth0"},
		"network a/b":        {Network: "a/b", ContainerID: "c", IfName: "eth0"},
		"network empty":      {Network: "", ContainerID: "c", IfName: "eth0"},
	}
	forEachFs(t, func(t *testing.T, e storeEnv) {
		s := e.store
		for name, key := range keys {
			t.Run(name, func(t *testing.T) {
				_, err := s.Load(key)
				assert.Error(t, err)
				assert.False(t, errors.Is(err, ErrNotFound) || errors.Is(err, ErrCorrupt), "load: %v", err)
				assert.Error(t, s.Save(&Record{Key: key, Phase: PhaseAdding}))
				assert.Error(t, s.Remove(key))
				p, err := s.Quarantine(key)
				assert.Error(t, err)
				assert.Empty(t, p)
				assert.Empty(t, s.Path(key))
				_, err = s.Lock(t.Context(), key, Holder{Verb: "ADD"})
				assert.Error(t, err)
				_, err = s.TryLock(key, Holder{Verb: "ADD"})
				assert.Error(t, err)
			})
		}
		_, err := e.fs.Stat(e.dir)
		assert.ErrorIs(t, err, os.ErrNotExist, "nothing was created")
	})
}

func TestNewDiskStoreNilLocker(t *testing.T) {
	assert.Panics(t, func() { NewDiskStore(afero.NewMemMapFs(), "/x", nil) })
}
