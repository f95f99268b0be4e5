package cache

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTeardownIndex(t *testing.T) {
	forEachFs(t, func(t *testing.T, e storeEnv) {
		s := e.store
		none, err := s.PendingTeardown("podnet", 5)
		require.NoError(t, err)
		assert.Empty(t, none)

		for _, cid := range []string{"old", "new"} {
			require.NoError(t, s.MarkTeardown(testKey(cid)))
			require.NoError(t, s.MarkTeardown(testKey(cid)), "marking twice is fine")
			time.Sleep(20 * time.Millisecond) // distinct mtimes (coarse kernel clock): oldest note first
		}
		got, err := s.PendingTeardown("podnet", 5)
		require.NoError(t, err)
		assert.Equal(t, []Key{testKey("old"), testKey("new")}, got)
		got, err = s.PendingTeardown("podnet", 1)
		require.NoError(t, err)
		assert.Equal(t, []Key{testKey("old")}, got)
		other, err := s.PendingTeardown("othernet", 5)
		require.NoError(t, err)
		assert.Empty(t, other)

		require.NoError(t, s.ClearTeardown(testKey("old")))
		require.NoError(t, s.ClearTeardown(testKey("old")), "clearing a missing note is fine")
		got, err = s.PendingTeardown("podnet", 5)
		require.NoError(t, err)
		assert.Equal(t, []Key{testKey("new")}, got)

		_, err = s.PendingTeardown("../etc", 5)
		require.Error(t, err)
		require.Error(t, s.MarkTeardown(Key{Network: "podnet", ContainerID: "../x", IfName: "eth0"}))
	})
}

func TestProbe(t *testing.T) {
	forEachFs(t, func(t *testing.T, e storeEnv) {
		require.NoError(t, e.store.Probe())
		fi, err := e.fs.Stat(e.dir)
		require.NoError(t, err)
		assert.True(t, fi.IsDir())
		names, err := readDirNames(e.fs, e.dir)
		require.NoError(t, err)
		assert.Empty(t, names, "the probe leaves nothing behind")
	})
}
