package adopt

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/internal/libcnitest"
)

// TestAdoptRefusesBadOptions: nothing is read or written without a usable
// primary conflist and an absolute cache dir.
func TestAdoptRefusesBadOptions(t *testing.T) {
	cases := []struct {
		name     string
		confList string
		cacheDir string
		want     string
	}{
		{"no conflist", "", "/var/lib/cni/catena", "the primary's conflist"},
		{"not JSON", "{", "/var/lib/cni/catena", "the primary's conflist"},
		{"bad network name", `{"name":"../x","plugins":[{"type":"bridge"}]}`, "/var/lib/cni/catena", `network name "../x"`},
		{"relative cache dir", libcnitest.PrimaryConf, "catena", `cache dir "catena" is not an absolute path`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			libcnitest.AddThroughLibcni(t, libcnitest.PrimaryConf, w.LibcniDir, libcnitest.TestPod)
			_, err := Adopt(context.Background(), Options{ResultsDir: w.ResultsDir(), CacheDir: c.cacheDir, ConfList: []byte(c.confList)})
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			_, err = os.Stat(w.CatenaDir)
			assert.ErrorIs(t, err, os.ErrNotExist, "nothing written")
		})
	}
}

// TestAdoptWithoutCache: a node whose runtime never cached anything has
// nothing to adopt.
func TestAdoptWithoutCache(t *testing.T) {
	w := newWorld(t)
	rep, err := w.adopt(t, libcnitest.PrimaryConf)
	require.NoError(t, err)
	assert.Equal(t, Report{}, rep)
}

// TestAdoptStoreFailureIsAnError: a record that cannot be written stops the
// adoption with an error naming the attachment, so that the agent does not
// install a conflist that would leak the attachment on DEL.
func TestAdoptStoreFailureIsAnError(t *testing.T) {
	w := newWorld(t)
	libcnitest.AddThroughLibcni(t, libcnitest.PrimaryConf, w.LibcniDir, libcnitest.TestPod)
	store := cache.NewDiskStore(afero.NewReadOnlyFs(afero.NewMemMapFs()), "/catena", cache.NewMemLocker())
	rep, err := Adopt(context.Background(), Options{ResultsDir: w.ResultsDir(), ConfList: []byte(libcnitest.PrimaryConf), Store: store})
	require.Error(t, err)
	assert.Contains(t, err.Error(), libcnitest.TestKey.String())
	assert.Contains(t, err.Error(), "saving the adopted record")
	assert.Zero(t, rep.Adopted)
}

// TestAdoptLeavesCorruptRecord: a corrupt record is Catena's to recover;
// adoption neither overwrites nor counts it.
func TestAdoptLeavesCorruptRecord(t *testing.T) {
	w := newWorld(t)
	libcnitest.AddThroughLibcni(t, libcnitest.PrimaryConf, w.LibcniDir, libcnitest.TestPod)
	path := w.Store.Path(libcnitest.TestKey)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte("torn"), 0o600))

	rep, err := w.adopt(t, libcnitest.PrimaryConf)
	require.NoError(t, err)
	assert.Zero(t, rep.Adopted)
	require.Len(t, rep.Skipped, 1)
	assert.Contains(t, rep.Skipped[0], "catena's record is corrupt")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "torn", string(data))
}

// vanishingStore deletes libcni's cache file right after a Save, as a DEL
// through the primary racing the adoption would.
type vanishingStore struct {
	cache.Store
	file string
}

func (s *vanishingStore) Save(rec *cache.Record) error {
	if err := s.Store.Save(rec); err != nil {
		return err
	}
	return os.Remove(s.file)
}

// TestAdoptDropsAttachmentDeletedMeanwhile: an attachment whose cache file
// disappears during adoption was deleted; its record is removed again.
func TestAdoptDropsAttachmentDeletedMeanwhile(t *testing.T) {
	w := newWorld(t)
	libcnitest.AddThroughLibcni(t, libcnitest.PrimaryConf, w.LibcniDir, libcnitest.TestPod)
	file := filepath.Join(w.ResultsDir(), "k8s-pod-net-"+libcnitest.TestPod.ContainerID+"-eth0")
	rep, err := Adopt(context.Background(), Options{ResultsDir: w.ResultsDir(), ConfList: []byte(libcnitest.PrimaryConf),
		Store: &vanishingStore{Store: w.Store, file: file}})
	require.NoError(t, err)
	assert.Zero(t, rep.Adopted)
	require.Len(t, rep.Skipped, 1)
	assert.Contains(t, rep.Skipped[0], "deleted by the runtime during adoption")
	_, err = w.Store.Load(libcnitest.TestKey)
	assert.ErrorIs(t, err, cache.ErrNotFound)
}

// TestAdoptOnMemFs: the reads and the store are injected.
func TestAdoptOnMemFs(t *testing.T) {
	w := newWorld(t)
	libcnitest.AddThroughLibcni(t, libcnitest.PrimaryConf, w.LibcniDir, libcnitest.TestPod)
	name := "k8s-pod-net-" + libcnitest.TestPod.ContainerID + "-eth0"
	data, err := os.ReadFile(filepath.Join(w.ResultsDir(), name))
	require.NoError(t, err)
	mem := afero.NewMemMapFs()
	require.NoError(t, afero.WriteFile(mem, "/results/"+name, data, 0o600))
	store := cache.NewDiskStore(mem, "/catena", cache.NewMemLocker())

	rep, err := Adopt(context.Background(), Options{ResultsDir: "/results", ConfList: []byte(libcnitest.PrimaryConf), FS: mem, Store: store})
	require.NoError(t, err)
	assert.Equal(t, Report{Adopted: 1}, rep)
	rec, err := store.Load(libcnitest.TestKey)
	require.NoError(t, err)
	assert.Len(t, rec.Steps, 3)
	_, err = os.Stat(w.CatenaDir)
	assert.ErrorIs(t, err, os.ErrNotExist, "the real filesystem is not touched")
}
