package adopt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/fileutil"
	"github.com/catena-cni/catena/internal/libcnitest"
)

// TestAdoptRefusesUntrustedResultsDir: an entry planted by
// another user in a results dir anybody can write must not become a record
// (root-owned, with the delegate configs its writer chose). The whole dir
// is refused, as Catena refuses such a cache dir: the pass fails, names the
// dir and the fix, and nothing is adopted.
func TestAdoptRefusesUntrustedResultsDir(t *testing.T) {
	libcnitest.RequireRootForChown(t)
	w := newWorld(t)
	require.NoError(t, os.MkdirAll(w.ResultsDir(), 0o700))
	require.NoError(t, os.Chmod(w.ResultsDir(), 0o777))
	libcnitest.Plant(t, w.ResultsDir(), "planted", libcnitest.Nobody, 0o644)

	rep, err := w.adopt(t, libcnitest.PrimaryConf)
	require.Error(t, err, "adopted %d from a 0777 dir", rep.Adopted)
	require.ErrorIs(t, err, fileutil.ErrUntrusted)
	assert.Contains(t, err.Error(), w.ResultsDir())
	assert.Contains(t, err.Error(), "writable by group or others")
	assert.Zero(t, rep.Adopted)
	keys, err := w.Store.List()
	require.NoError(t, err)
	assert.Empty(t, keys, "no record from an untrusted dir")
}

// TestAdoptRefusesUntrustedEntries: in a trusted dir, an entry of another
// uid or writable by group or others is refused (reported and logged with
// the reason), the others are adopted; once its owner and mode are fixed
// (its ctime changes), the next pass of the same Adopter adopts it.
func TestAdoptRefusesUntrustedEntries(t *testing.T) {
	libcnitest.RequireRootForChown(t)
	w := newWorld(t)
	libcnitest.AddThroughLibcni(t, libcnitest.PrimaryConf, w.LibcniDir, libcnitest.TestPod)
	planted := libcnitest.Plant(t, w.ResultsDir(), "planted", libcnitest.Nobody, 0o600)
	open := libcnitest.Plant(t, w.ResultsDir(), "open", 0, 0o662)

	a := w.adopter(t)
	rep := w.pass(t, a)
	assert.Equal(t, 1, rep.Adopted)
	require.Len(t, rep.Refused, 2, "%q", rep.Refused)
	assert.True(t, strings.HasPrefix(rep.Refused[0], open+": "), rep.Refused[0])
	assert.Contains(t, rep.Refused[0], "is writable by group or others")
	assert.True(t, strings.HasPrefix(rep.Refused[1], planted+": "), rep.Refused[1])
	assert.Contains(t, rep.Refused[1], "is owned by uid 65534")
	assert.Contains(t, w.Log.String(), "libcni cache entry refused")
	keys, err := w.Store.List()
	require.NoError(t, err)
	assert.Equal(t, []cache.Key{libcnitest.TestKey}, keys)

	assert.Equal(t, Report{}, w.pass(t, a), "refused entries are reported once")
	path := filepath.Join(w.ResultsDir(), planted)
	require.NoError(t, os.Chown(path, 0, 0))
	assert.Equal(t, Report{Adopted: 1}, w.pass(t, a), "vouched for by root: adopted")
}
