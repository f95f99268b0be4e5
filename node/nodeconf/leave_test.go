package nodeconf

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWatchLeaving: as the watch ends, the generated conflist is removed
// only when Leaving says the agent leaves for good, and only if it is
// still catena-agent's; the primary is never touched.
func TestWatchLeaving(t *testing.T) {
	for _, tc := range []struct {
		name    string
		leaving func() (bool, string)
		// replace, if set, is written over the generated file before the
		// watch ends.
		replace     string
		wantRemoved bool
		wantLog     string
	}{
		{name: "no leaving: a plain stop", wantRemoved: false},
		{name: "present: a rollout", leaving: func() (bool, string) { return false, "daemonset x/y is present" },
			wantLog: "the generated conflist stays"},
		{name: "deleted", leaving: func() (bool, string) { return true, "daemonset x/y was deleted" },
			wantRemoved: true, wantLog: "removed the generated conflist"},
		{name: "deleted, but the file is not ours any more", leaving: func() (bool, string) { return true, "daemonset x/y was deleted" },
			replace: bridgeCL, wantLog: "could not be removed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := startWatchingWith(t, func(i *Installer) { i.Leaving = tc.leaving })
			own := filepath.Join(w.dir, ownName)
			primary := filepath.Join(w.dir, "10-a.conflist")
			before, err := os.ReadFile(primary)
			require.NoError(t, err)
			if tc.replace != "" {
				// Written in place: the watch's rewrite is at least a
				// second of backoff away.
				require.NoError(t, os.WriteFile(own, []byte(tc.replace), 0o644))
			}
			w.cancel()
			require.NoError(t, <-w.done)
			w.done <- nil // for the cleanup
			if tc.wantRemoved {
				assert.NoFileExists(t, own)
			} else {
				assert.FileExists(t, own)
			}
			after, err := os.ReadFile(primary)
			require.NoError(t, err)
			assert.Equal(t, before, after, "the primary is untouched")
			assert.Contains(t, w.logs.String(), tc.wantLog)
			assert.Contains(t, w.logs.String(), reasonOf(tc.leaving))
		})
	}
}

func reasonOf(leaving func() (bool, string)) string {
	if leaving == nil {
		return ""
	}
	_, why := leaving()
	return why
}
