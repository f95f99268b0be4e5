package events

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/fileutil"
)

// TestEventJournalTrust: the event journal is reached like the records: a
// symlinked events/ or events.jsonl is never followed (nothing is written
// through it), and an events dir or file another user owns or could write
// is refused, by Append and by Read, with an error naming it.
func TestEventJournalTrust(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root to chown (CI=true: it must run)")
		}
		t.Skip("needs root to chown")
	}
	tests := []struct {
		name      string
		plant     func(t *testing.T, dir, outside string) string // returns the path to be named, "" for a plain refusal
		untrusted bool
	}{
		{"events dir is a symlink", func(t *testing.T, dir, outside string) string {
			require.NoError(t, os.RemoveAll(filepath.Join(dir, "events")))
			require.NoError(t, os.Symlink(outside, filepath.Join(dir, "events")))
			return filepath.Join(dir, "events")
		}, true},
		{"events dir owned by another uid", func(t *testing.T, dir, _ string) string {
			p := filepath.Join(dir, "events")
			require.NoError(t, os.Chown(p, 65534, 65534))
			return p
		}, true},
		{"events dir writable by others", func(t *testing.T, dir, _ string) string {
			p := filepath.Join(dir, "events")
			require.NoError(t, os.Chmod(p, 0o777))
			return p
		}, true},
		{"journal owned by another uid", func(t *testing.T, dir, _ string) string {
			p := Path(dir)
			require.NoError(t, os.Chown(p, 65534, 65534))
			return p
		}, true},
		{"journal writable by others", func(t *testing.T, dir, _ string) string {
			p := Path(dir)
			require.NoError(t, os.Chmod(p, 0o666))
			return p
		}, true},
		{"journal is a symlink", func(t *testing.T, dir, outside string) string {
			p := Path(dir)
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Symlink(filepath.Join(outside, "events.jsonl"), p))
			return p
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			dir, outside := filepath.Join(base, "catena"), filepath.Join(base, "outside")
			require.NoError(t, os.MkdirAll(outside, 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(outside, "events.jsonl"), []byte("{}\n"), 0o600))
			j := &Writer{CacheDir: dir}
			t0 := time.Now()
			require.NoError(t, j.Append(Op{Verb: "ADD", Start: t0}))
			path := tt.plant(t, dir, outside)

			appendErr := j.Append(Op{Verb: "DEL", Start: t0})
			_, _, readErr := Read(afero.NewOsFs(), dir, t0.Add(-time.Hour))
			for what, err := range map[string]error{"Append": appendErr, "Read": readErr} {
				require.Error(t, err, what)
				assert.Contains(t, err.Error(), path, what)
				if tt.untrusted {
					var ue *fileutil.UntrustedError
					require.True(t, errors.As(err, &ue), "%s: %v", what, err)
					assert.Equal(t, path, ue.Path)
				} else {
					assert.ErrorIs(t, err, syscall.ELOOP, what)
				}
			}
			data, err := os.ReadFile(filepath.Join(outside, "events.jsonl"))
			require.NoError(t, err)
			assert.Equal(t, "{}\n", string(data), "nothing was written outside the cache dir")
		})
	}
}
