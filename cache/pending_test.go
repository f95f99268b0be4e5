package cache

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTeardownIndex(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	forEachFs(t, func(t *testing.T, e storeEnv) {
		s := e.store
		none, err := s.PendingTeardown("podnet", 5)
		require.NoError(t, err)
		assert.Empty(t, none)

		// Noted in this order, due in another: the soonest due comes first.
		notes := map[string]PendingNote{
			"hung":  {Due: t0.Add(time.Minute), Attempts: 7},
			"fresh": {Due: t0, Attempts: 1},
			"other": {Due: t0.Add(time.Second), Attempts: 2},
		}
		for _, cid := range []string{"hung", "fresh", "other"} {
			require.NoError(t, s.NotePending(testKey(cid), PendingNote{Due: t0.Add(time.Hour)}))
			require.NoError(t, s.NotePending(testKey(cid), notes[cid]), "re-noting rewrites the note")
		}
		got, err := s.PendingTeardown("podnet", 5)
		require.NoError(t, err)
		assert.Equal(t, []Pending{
			{Key: testKey("fresh"), Note: notes["fresh"]},
			{Key: testKey("other"), Note: notes["other"]},
			{Key: testKey("hung"), Note: notes["hung"]},
		}, got)
		got, err = s.PendingTeardown("podnet", 1)
		require.NoError(t, err)
		assert.Equal(t, []Pending{{Key: testKey("fresh"), Note: notes["fresh"]}}, got)
		other, err := s.PendingTeardown("othernet", 5)
		require.NoError(t, err)
		assert.Empty(t, other)

		require.NoError(t, s.ClearPending(testKey("fresh")))
		require.NoError(t, s.ClearPending(testKey("fresh")), "clearing a missing note is fine")
		got, err = s.PendingTeardown("podnet", 5)
		require.NoError(t, err)
		require.Len(t, got, 2)
		assert.Equal(t, testKey("other"), got[0].Key)

		_, err = s.PendingTeardown("../etc", 5)
		require.Error(t, err)
		require.Error(t, s.NotePending(Key{Network: "podnet", ContainerID: "../x", IfName: "eth0"}, PendingNote{}))
	})
}

// TestTeardownIndexOddMarkers: an empty marker (a rewrite a crash cut short) or one
// that is torn or garbage is due at once, and says why when it is bad; an
// entry that is not a regular file is ignored.
func TestTeardownIndexOddMarkers(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	forEachFs(t, func(t *testing.T, e storeEnv) {
		s := e.store
		require.NoError(t, s.NotePending(testKey("later"), PendingNote{Due: t0, Attempts: 3}))
		dir := filepath.Join(e.dir, pendingDir, "podnet")
		for cid, content := range map[string]string{"legacy": "", "torn": "v1 17", "garbage": strings.Repeat("x", 4096)} {
			require.NoError(t, afero.WriteFile(e.fs, filepath.Join(dir, cid+":eth0"), []byte(content), 0o600))
		}
		require.NoError(t, e.fs.Mkdir(filepath.Join(dir, "adir:eth0"), 0o700))

		got, err := s.PendingTeardown("podnet", 10)
		require.NoError(t, err)
		require.Len(t, got, 4)
		byCID := map[string]Pending{}
		for _, p := range got {
			byCID[p.Key.ContainerID] = p
		}
		assert.Equal(t, testKey("later"), got[3].Key, "the noted one is due last")
		assert.NoError(t, byCID["legacy"].Bad, "an empty marker is a cut-short rewrite, not a bad one")
		for _, cid := range []string{"legacy", "torn", "garbage"} {
			assert.Equal(t, dueAtOnce(), byCID[cid].Note, cid)
		}
		require.Error(t, byCID["torn"].Bad)
		assert.Contains(t, byCID["torn"].Bad.Error(), "torn:eth0")
		require.Error(t, byCID["garbage"].Bad)
	})
}

func TestNoteCodec(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 123, time.UTC)
	good := []struct {
		name string
		in   string
		want PendingNote
	}{
		{name: "empty: a cut-short rewrite", in: "", want: dueAtOnce()},
		{name: "note", in: fmt.Sprintf("v1 %d 3\n", t0.UnixNano()), want: PendingNote{Due: t0, Attempts: 3}},
		{name: "leading zeros", in: "v1 007 0001\n", want: PendingNote{Due: time.Unix(0, 7).UTC(), Attempts: 1}},
		{name: "latest due", in: "v1 9223372036854775807 1000000\n", want: PendingNote{Due: time.Unix(0, math.MaxInt64).UTC(), Attempts: 1000000}},
	}
	for _, tc := range good {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseNote([]byte(tc.in))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	bad := []string{
		"v1 1 1", "v1 1 1\n\n", "v2 1 1\n", "v1 1\n", "v1 1 1 1\n", "v1  1 1\n", "v1 -1 1\n", "v1 +1 1\n",
		"v1 1 -1\n", "v1 1_0 1\n", "v1 0x10 1\n", "v1 9223372036854775808 1\n", "v1 1 1000001\n",
		"v1 1 99999999999999999999\n", "v1 1 1\r\n", "\n", " v1 1 1\n", "v1 1 1\x00\n", strings.Repeat("v", 65),
	}
	for _, in := range bad {
		t.Run(fmt.Sprintf("bad %q", in), func(t *testing.T) {
			got, err := ParseNote([]byte(in))
			require.ErrorIs(t, err, errBadNote)
			assert.Equal(t, dueAtOnce(), got, "a bad note is due at once")
		})
	}
	encoded := []struct {
		name string
		in   PendingNote
		want PendingNote
	}{
		{name: "round trip", in: PendingNote{Due: t0, Attempts: 2}, want: PendingNote{Due: t0, Attempts: 2}},
		{name: "zero time: due at once", in: PendingNote{}, want: dueAtOnce()},
		{name: "far future clamped", in: PendingNote{Due: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), Attempts: -4},
			want: PendingNote{Due: time.Unix(0, math.MaxInt64).UTC()}},
		{name: "attempts clamped", in: PendingNote{Due: t0, Attempts: math.MaxInt}, want: PendingNote{Due: t0, Attempts: maxNoteAttempts}},
	}
	for _, tc := range encoded {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseNote(EncodeNote(tc.in))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
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
