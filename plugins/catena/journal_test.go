package main

import (
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain/events"
)

// TestJournalSaysWhatTheProcessCost: each operation of a catena process
// is journaled with its durable writes and its process block (its own
// start-up, CPU and run delay), as the node-density benchmark reads them.
func TestJournalSaysWhatTheProcessCost(t *testing.T) {
	w := newBoundsWorld(t)
	cacheDir := newCacheDir(t)
	chain := `[{"type":"failer"},{"type":"failer"}]`
	require.NoError(t, w.run(t, "ADD", cacheDir, chain).err)
	require.NoError(t, w.run(t, "DEL", cacheDir, chain).err)

	ops, _, err := events.Read(afero.NewOsFs(), cacheDir, time.Time{})
	require.NoError(t, err)
	require.Len(t, ops, 2)
	for _, op := range ops {
		require.NotNil(t, op.Process, "%s", op.Verb)
		assert.Positive(t, op.Process.CPU, "%s: its threads' CPU", op.Verb)
		assert.GreaterOrEqual(t, op.Process.Startup, time.Duration(0))
		assert.GreaterOrEqual(t, op.Process.RunDelay, time.Duration(0))
		assert.Positive(t, op.Writes, op.Verb)
	}
	assert.Equal(t, "ADD", ops[0].Verb)
	assert.Equal(t, 3, ops[0].WriteCount, "n+1 writes for 2 delegates")
	assert.Equal(t, 1, ops[1].WriteCount, "a DEL removes the record")
}
