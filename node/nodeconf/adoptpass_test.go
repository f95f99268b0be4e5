package nodeconf

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSyncAdoptsOnEveryPass: where the logic lives:
// adoption runs before the first write (so that nothing is installed
// before the primary's attachments have records), again right after it
// (ADDs through the primary that finished during the first adoption), and
// on every later pass although the generated file is unchanged (ADDs that
// started before the runtime reloaded its config). A failure of a later
// pass's adoption leaves the file and reports not ready.
func TestSyncAdoptsOnEveryPass(t *testing.T) {
	inst, _ := newTestInstaller(t, map[string]string{"10-a.conflist": bridgeCL})
	var calls []bool // whether the generated file was in place at each call
	var fail error
	inst.Adopt = func(_ context.Context, p *Primary) error {
		assert.Equal(t, "10-a.conflist", p.File)
		calls = append(calls, generatedFile(t, inst) != nil)
		return fail
	}
	assert.True(t, mustSync(t, inst).Wrote)
	assert.Equal(t, []bool{false, true}, calls, "before and after the write")
	good := generatedFile(t, inst)

	for n := 1; n <= 3; n++ {
		st := mustSync(t, inst)
		assert.False(t, st.Wrote)
		assert.Len(t, calls, 2+n, "pass %d without a write adopts too", n)
	}

	fail = errors.New("disk on fire")
	st, err := inst.Sync(context.Background())
	require.ErrorContains(t, err, `adopting the attachments of network "podnet" of 10-a.conflist: disk on fire`)
	assert.False(t, st.Ready)
	assert.Equal(t, good, generatedFile(t, inst), "the file stays")
	fail = nil
	mustSync(t, inst)
}
