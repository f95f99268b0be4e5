package cache

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// quarantined is the name Quarantine gives a record of cid moved aside at.
func quarantined(cid string, at time.Time) string {
	return "podnet_" + cid + ":eth0." + strconv.FormatInt(at.UnixNano(), 10) + recordExt
}

func TestPruneQuarantine(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	tests := []struct {
		name     string
		files    []string // regular files in quarantine/
		dirs     []string // directories in quarantine/
		maxAge   time.Duration
		maxCount int
		want     []string // what is pruned, oldest first
	}{
		{name: "nothing to prune", files: []string{quarantined("a", now.Add(-day))}, maxAge: 30 * day, maxCount: 100},
		{
			name:   "older than maxAge",
			files:  []string{quarantined("a", now.Add(-31*day)), quarantined("b", now.Add(-29*day)), quarantined("c", now.Add(-40*day))},
			maxAge: 30 * day, maxCount: 100,
			want: []string{quarantined("c", now.Add(-40*day)), quarantined("a", now.Add(-31*day))},
		},
		{
			name: "beyond maxCount: the oldest go",
			files: []string{quarantined("a", now.Add(-3*time.Hour)), quarantined("b", now.Add(-1*time.Hour)),
				quarantined("c", now.Add(-2*time.Hour)), quarantined("d", now.Add(-4*time.Hour))},
			maxAge: 30 * day, maxCount: 2,
			want: []string{quarantined("d", now.Add(-4*time.Hour)), quarantined("a", now.Add(-3*time.Hour))},
		},
		{
			name:   "both bounds",
			files:  []string{quarantined("a", now.Add(-31*day)), quarantined("b", now.Add(-2*day)), quarantined("c", now.Add(-1*day))},
			maxAge: 30 * day, maxCount: 1,
			want: []string{quarantined("a", now.Add(-31*day)), quarantined("b", now.Add(-2*day))},
		},
		{
			name: "a quarantined network dir's file, a future time in its name",
			files: []string{"podnet." + strconv.FormatInt(now.Add(-31*day).UnixNano(), 10),
				quarantined("f", now.Add(day))},
			maxAge: 30 * day, maxCount: 1,
			want: []string{"podnet." + strconv.FormatInt(now.Add(-31*day).UnixNano(), 10)},
		},
		{
			name: "only names that match the pattern",
			files: []string{"notes.txt", "podnet_a:eth0.json", "podnet_a:eth0.12x4.json", ".hidden.1.json",
				"podnet_a:eth0.99999999999999999999.json", "." + strconv.FormatInt(now.Add(-31*day).UnixNano(), 10)},
			maxAge: 30 * day, maxCount: 0,
		},
		{
			name:   "directories are left alone",
			dirs:   []string{"podnet." + strconv.FormatInt(now.Add(-40*day).UnixNano(), 10)},
			files:  []string{quarantined("a", now.Add(-31*day))},
			maxAge: 30 * day, maxCount: 0,
			want: []string{quarantined("a", now.Add(-31*day))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachFs(t, func(t *testing.T, e storeEnv) {
				qdir := filepath.Join(e.dir, quarantineDir)
				require.NoError(t, e.fs.MkdirAll(qdir, 0o700))
				for _, f := range tt.files {
					require.NoError(t, afero.WriteFile(e.fs, filepath.Join(qdir, f), []byte("corrupt"), 0o600))
				}
				for _, d := range tt.dirs {
					require.NoError(t, e.fs.MkdirAll(filepath.Join(qdir, d), 0o700))
					require.NoError(t, afero.WriteFile(e.fs, filepath.Join(qdir, d, "c:eth0.json"), []byte("x"), 0o600))
				}
				pruned, err := e.store.PruneQuarantine(now, tt.maxAge, tt.maxCount)
				require.NoError(t, err)
				var want []string
				for _, f := range tt.want {
					want = append(want, filepath.Join(qdir, f))
				}
				assert.Equal(t, want, pruned)
				for _, f := range append(slices.Clone(tt.files), tt.dirs...) {
					_, err := e.fs.Stat(filepath.Join(qdir, f))
					if slices.Contains(tt.want, f) {
						assert.ErrorIs(t, err, os.ErrNotExist, "%s is pruned", f)
					} else {
						assert.NoError(t, err, "%s is kept", f)
					}
				}
			})
		})
	}
}

func TestPruneQuarantineWithoutQuarantine(t *testing.T) {
	forEachFs(t, func(t *testing.T, e storeEnv) {
		pruned, err := e.store.PruneQuarantine(time.Now(), time.Hour, 1)
		require.NoError(t, err)
		assert.Empty(t, pruned)
	})
	forEachFs(t, func(t *testing.T, e storeEnv) {
		require.NoError(t, e.fs.MkdirAll(e.dir, 0o700))
		require.NoError(t, afero.WriteFile(e.fs, filepath.Join(e.dir, quarantineDir), []byte("x"), 0o600))
		_, err := e.store.PruneQuarantine(time.Now(), time.Hour, 0)
		require.Error(t, err)
		assert.Contains(t, err.Error(), filepath.Join(e.dir, quarantineDir))
	})
}

// TestPruneQuarantineNeverFollowsSymlinks: a symlink in quarantine/, or in
// its place, is never followed: what it points to stays, and so does the
// link itself (only regular files are pruned).
func TestPruneQuarantineNeverFollowsSymlinks(t *testing.T) {
	now := time.Now()
	old := now.Add(-100 * 24 * time.Hour)
	t.Run("entries", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "catena")
		qdir := filepath.Join(dir, quarantineDir)
		require.NoError(t, os.MkdirAll(qdir, 0o700))
		outside := t.TempDir()
		victim := filepath.Join(outside, "victim")
		require.NoError(t, os.WriteFile(victim, []byte("keep me"), 0o600))
		link := filepath.Join(qdir, quarantined("link", old))
		require.NoError(t, os.Symlink(victim, link))
		linkDir := filepath.Join(qdir, "podnet."+strconv.FormatInt(old.UnixNano(), 10))
		require.NoError(t, os.Symlink(outside, linkDir))
		fifo := filepath.Join(qdir, quarantined("fifo", old))
		require.NoError(t, unix.Mkfifo(fifo, 0o600))
		regular := filepath.Join(qdir, quarantined("file", old))
		require.NoError(t, os.WriteFile(regular, []byte("corrupt"), 0o600))

		s := NewDiskStore(afero.NewOsFs(), dir, NewMemLocker())
		pruned, err := s.PruneQuarantine(now, time.Hour, 0)
		require.NoError(t, err)
		assert.Equal(t, []string{regular}, pruned)
		for _, p := range []string{link, linkDir, fifo, victim} {
			_, err := os.Lstat(p)
			assert.NoError(t, err, "%s is left", p)
		}
		data, err := os.ReadFile(victim)
		require.NoError(t, err)
		assert.Equal(t, "keep me", string(data))
	})
	t.Run("quarantine dir is a symlink", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "catena")
		require.NoError(t, os.MkdirAll(dir, 0o700))
		outside := t.TempDir()
		victim := filepath.Join(outside, quarantined("victim", old))
		require.NoError(t, os.WriteFile(victim, []byte("keep me"), 0o600))
		require.NoError(t, os.Symlink(outside, filepath.Join(dir, quarantineDir)))

		s := NewDiskStore(afero.NewOsFs(), dir, NewMemLocker())
		pruned, err := s.PruneQuarantine(now, time.Hour, 0)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "is a symlink")
		assert.Empty(t, pruned)
		_, err = os.Stat(victim)
		assert.NoError(t, err, "nothing is removed through the link")
	})
}
