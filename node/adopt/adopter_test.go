package adopt

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/internal/libcnitest"
)

// adopter returns an Adopter as catena-agent builds it.
func (w *world) adopter(t *testing.T) *Adopter {
	t.Helper()
	a, err := New(Options{ResultsDir: w.ResultsDir(), CacheDir: w.CatenaDir, Logger: slog.New(slog.NewTextHandler(w.Log, nil))})
	require.NoError(t, err)
	return a
}

// pass runs one pass of a on the primary.
func (w *world) pass(t *testing.T, a *Adopter) Report {
	t.Helper()
	rep, err := a.Adopt(context.Background(), []byte(libcnitest.PrimaryConf))
	require.NoError(t, err)
	return rep
}

// TestAdopterAdoptsLaterEntries: in package adopt: one
// Adopter serves every pass of the agent; each pass adopts the entries
// written since (an ADD through the primary after the install), reports
// nothing for entries settled before, and never brings back a record that
// a DEL through Catena removed while libcni's entry is still there.
func TestAdopterAdoptsLaterEntries(t *testing.T) {
	w := newWorld(t)
	a := w.adopter(t)
	libcnitest.AddThroughLibcni(t, libcnitest.PrimaryConf, w.LibcniDir, libcnitest.TestPod)
	assert.Equal(t, Report{Adopted: 1}, w.pass(t, a))

	b := libcnitest.TestPod
	b.ContainerID = "pod-b"
	libcnitest.AddThroughLibcni(t, libcnitest.PrimaryConf, w.LibcniDir, b)
	assert.Equal(t, Report{Adopted: 1}, w.pass(t, a), "b, ADDed after the first pass")
	assert.Equal(t, Report{}, w.pass(t, a), "nothing new")

	via := libcnitest.TestPod
	via.ContainerID = "pod-via-catena"
	m := libcnitest.RealEntry(t)
	m["containerId"] = via.ContainerID
	libcnitest.WithConfig(`{"cniVersion":"1.0.0","name":"k8s-pod-net","plugins":[{"type":"catena","delegates":[{"type":"bridge"}]}]}`)(m)
	require.NoError(t, os.WriteFile(filepath.Join(w.ResultsDir(), "k8s-pod-net-pod-via-catena-eth0"), libcnitest.EncodeEntry(t, m), 0o600))
	rep := w.pass(t, a)
	assert.Zero(t, rep.Adopted)
	require.Len(t, rep.Skipped, 1)
	assert.Contains(t, rep.Skipped[0], "made through catena")
	assert.Equal(t, Report{}, w.pass(t, a), "a skipped entry is settled too")

	// A DEL through Catena removes the record, then libcni the entry: a
	// pass in between must not adopt it again.
	require.NoError(t, w.Store.Remove(libcnitest.TestKey))
	assert.Equal(t, Report{}, w.pass(t, a))
	_, err := w.Store.Load(libcnitest.TestKey)
	require.ErrorIs(t, err, cache.ErrNotFound, "a deleted attachment's record brought back")

	// A file rewritten in place is a new ADD: looked at again.
	path := filepath.Join(w.ResultsDir(), "k8s-pod-net-pod-b-eth0")
	later := time.Now().Add(time.Minute)
	require.NoError(t, os.Chtimes(path, later, later))
	assert.Equal(t, Report{AlreadyPresent: 1}, w.pass(t, a))

	// Another primary's network starts afresh.
	other := `{"cniVersion":"1.0.0","name":"other-net","plugins":[{"type":"bridge"}]}`
	rep, err = a.Adopt(context.Background(), []byte(other))
	require.NoError(t, err)
	assert.Zero(t, rep.Adopted)
	assert.Len(t, rep.Skipped, 3, "every entry is of k8s-pod-net: %q", rep.Skipped)
}
