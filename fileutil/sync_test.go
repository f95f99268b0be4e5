package fileutil

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSyncFile: a real file is flushed by either path (one P: the raw
// call; more: the ordinary one), and a failed flush is an error naming the
// call; a file of a test filesystem uses its own Sync.
func TestSyncFile(t *testing.T) {
	for _, procs := range []int{1, 2} {
		for _, dataOnly := range []bool{true, false} {
			prev := runtime.GOMAXPROCS(procs)
			t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
			path := filepath.Join(t.TempDir(), "f")
			f, err := afero.NewOsFs().OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
			require.NoError(t, err)
			_, err = f.Write([]byte("x"))
			require.NoError(t, err)
			assert.NoError(t, SyncFile(f, dataOnly), "procs %d dataOnly %v", procs, dataOnly)
			require.NoError(t, f.Close())
			err = SyncFile(f, dataOnly)
			require.Error(t, err, "a closed file: procs %d dataOnly %v", procs, dataOnly)
			if dataOnly {
				assert.Contains(t, err.Error(), "fdatasync")
			}
			runtime.GOMAXPROCS(prev)
		}
	}
	mem := afero.NewMemMapFs()
	f, err := mem.Create("/m")
	require.NoError(t, err)
	assert.NoError(t, SyncFile(f, true))
}
