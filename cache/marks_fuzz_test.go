package cache

import (
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"
)

// FuzzMarks plants arbitrary content, under a plain or a hashed name, where
// the reconciler keeps its marks: listing never panics, and every mark it
// returns names a valid key whose file it is.
func FuzzMarks(f *testing.F) {
	key := Key{Network: "podnet", ContainerID: "c1", IfName: "eth0"}
	f.Add("c1:eth0.json", []byte(`{"key":{"network":"podnet","containerID":"c1","ifName":"eth0"},"markedAt":"2026-11-23T10:00:00Z","version":"v1"}`))
	f.Add("c1:eth0.json", []byte(`{"key":{"network":"podnet","containerID":"c2","ifName":"eth0"}}`))
	f.Add(hashedKeyName(key)+".json", []byte(`{"key":{"network":"podnet","containerID":"c1","ifName":"eth0"}}`))
	f.Add("c1:eth0.json", []byte(`{`))
	f.Add("x.json", []byte(`null`))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		if name == "" || name != filepath.Base(name) || name == "." || name == ".." {
			return
		}
		fsys := afero.NewMemMapFs()
		m := NewDiskMarks(fsys, "/cache")
		dir := filepath.Join("/cache", marksDir, "podnet")
		require.NoError(t, fsys.MkdirAll(dir, dirPerm))
		require.NoError(t, afero.WriteFile(fsys, filepath.Join(dir, name), data, filePerm))
		marks, err := m.Marks()
		if err != nil {
			return
		}
		for k, mk := range marks {
			require.NoError(t, k.Validate())
			require.Equal(t, k, mk.Key)
			require.Equal(t, filepath.Join(dir, name), m.path(k))
		}
	})
}
