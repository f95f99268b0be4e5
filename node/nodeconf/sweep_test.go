package nodeconf

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/fileutil"
)

// TestSweepTempRemovesStaleAtomicTemps: the sweep knows the temp names of
// fileutil's atomic writes, and removes only a stale one of Catena's own
// files: not a fresh one (a write in progress), not another file's.
func TestSweepTempRemovesStaleAtomicTemps(t *testing.T) {
	conf, bin := t.TempDir(), t.TempDir()
	now := time.Now()
	tempOf := func(t *testing.T, dir, name string, age time.Duration) string {
		t.Helper()
		p, err := fileutil.TempName(filepath.Join(dir, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(p, []byte("partial"), 0o600))
		require.NoError(t, os.Chtimes(p, now.Add(-age), now.Add(-age)))
		return p
	}
	tests := []struct {
		name    string
		dir     string
		file    string
		age     time.Duration
		removed bool
	}{
		{"the generated conflist's, stale", conf, ownName, 2 * staleTempAge, true},
		{"the generated conflist's, fresh", conf, ownName, staleTempAge / 2, false},
		{"a binary's, stale", bin, Binaries[0], 2 * staleTempAge, true},
		{"another file's, stale", conf, "10-primary.conflist", 2 * staleTempAge, false},
	}
	inst := &Installer{
		Fs:  afero.NewOsFs(),
		Cfg: Config{ConfDir: conf, ConfName: ownName, BinDir: bin},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: func() time.Time { return now },
	}
	paths := map[string]string{}
	for _, tt := range tests {
		paths[tt.name] = tempOf(t, tt.dir, tt.file, tt.age)
	}
	removed, err := inst.SweepTemp()
	require.NoError(t, err)
	for _, tt := range tests {
		_, err := os.Lstat(paths[tt.name])
		if tt.removed {
			assert.ErrorIs(t, err, os.ErrNotExist, tt.name)
			assert.Contains(t, removed, paths[tt.name], tt.name)
		} else {
			assert.NoError(t, err, tt.name)
			assert.NotContains(t, removed, paths[tt.name], tt.name)
		}
	}
}
