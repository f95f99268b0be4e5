package nodeconf

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGeneratedModeFollowsPrimary: the generated file is never more
// permissive than its primary (masked to at most 0644); a narrower mode
// given to it by hand counts as the same content, and a rewrite keeps it.
func TestGeneratedModeFollowsPrimary(t *testing.T) {
	own := filepath.Join(confDir, ownName)
	mode := func(i *Installer) os.FileMode {
		fi, err := i.Fs.Stat(own)
		require.NoError(t, err)
		return fi.Mode().Perm()
	}
	for _, tc := range []struct {
		name    string
		primary os.FileMode
		want    os.FileMode
	}{
		{"0600 primary", 0o600, 0o600},
		{"0644 primary", 0o644, 0o644},
		{"0666 primary", 0o666, 0o644},
		{"0640 primary", 0o640, 0o640},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i, _ := newTestInstaller(t, map[string]string{"10-a.conflist": bridgeCL})
			require.NoError(t, i.Fs.Chmod(filepath.Join(confDir, "10-a.conflist"), tc.primary))
			mustSync(t, i)
			assert.Equal(t, tc.want, mode(i))
		})
	}

	t.Run("chmods narrower are kept, no rewrite", func(t *testing.T) {
		i, _ := newTestInstaller(t, map[string]string{"10-a.conflist": bridgeCL})
		require.True(t, mustSync(t, i).Wrote)
		writes := 0
		for _, m := range []os.FileMode{0o600, 0o400, 0o640} {
			require.NoError(t, i.Fs.Chmod(own, m))
			if mustSync(t, i).Wrote {
				writes++
			}
			assert.Equal(t, m, mode(i), "the narrower mode is kept")
		}
		assert.Equal(t, 0, writes, "a chmod narrower than the primary is no change")

		require.NoError(t, i.Fs.Chmod(own, 0o600))
		require.NoError(t, writeTrunc(i, filepath.Join(confDir, "10-a.conflist"), bridgeCL+" "))
		require.True(t, mustSync(t, i).Wrote, "the primary changed")
		assert.Equal(t, os.FileMode(0o600), mode(i), "a rewrite keeps the narrower mode")

		require.NoError(t, i.Fs.Chmod(own, 0o666))
		require.True(t, mustSync(t, i).Wrote, "wider than the primary: rewritten")
		assert.Equal(t, os.FileMode(0o644), mode(i))
	})
}

func writeTrunc(i *Installer, path, data string) error {
	f, err := i.Fs.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(data); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
