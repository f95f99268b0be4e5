package nodeconf

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"
)

// FuzzSyncConfDir runs the agent's installer on a conf dir (afero
// MemMapFs) holding two files of arbitrary bytes, with arbitrary places in
// the runtime's order and extensions: what chooses the primary among the
// conf dir's files, skips and follows catena-agent's generated files,
// parses, checks nesting and wraps. Nothing panics; when a pass is ready,
// exactly one file carries the generated key (the generated file, named
// ConfName), it wraps a file of the dir that is not catena-agent's and
// parses as a primary, and, when no file of the dir was catena-agent's, the
// one the runtime would load; a second pass writes nothing.
func FuzzSyncConfDir(f *testing.F) {
	gen := `{"cniVersion":"1.0.0","name":"podnet","catena.dev/generated":{"by":"catena-agent","source":"10-a.conflist","sha256":""},` +
		`"plugins":[{"type":"catena","delegates":[{"type":"bridge"}]}]}`
	f.Add(uint8(10), uint8(1), []byte(bridgeCL), uint8(20), uint8(1), []byte(`{"cniVersion":"1.0.0","name":"b","plugins":[{"type":"ptp"}]}`))
	f.Add(uint8(10), uint8(0), []byte(`{"cniVersion":"0.4.0","name":"legacy","type":"bridge"}`), uint8(5), uint8(2), []byte(`{"name":"x","plugins":[{"type":"bridge"}]}`))
	f.Add(uint8(0), uint8(1), []byte(gen), uint8(10), uint8(1), []byte(bridgeCL))
	f.Add(uint8(1), uint8(1), []byte(gen), uint8(10), uint8(1), []byte(bridgeCL))
	f.Add(uint8(5), uint8(0), []byte(`{"cniVersion":"0.3.1","name":"multus","type":"multus","delegates":[`+gen+`]}`), uint8(10), uint8(1), []byte(bridgeCL))
	f.Add(uint8(10), uint8(1), []byte(`{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge"}`), uint8(20), uint8(1), []byte(bridgeCL))
	exts := []string{".conf", ".conflist", ".json"}
	f.Fuzz(func(t *testing.T, orderA, extA uint8, dataA []byte, orderB, extB uint8, dataB []byte) {
		nameA := fmt.Sprintf("%02d-a%s", orderA%100, exts[int(extA)%len(exts)])
		nameB := fmt.Sprintf("%02d-b%s", orderB%100, exts[int(extB)%len(exts)])
		fsys := afero.NewMemMapFs()
		require.NoError(t, afero.WriteFile(fsys, filepath.Join(confDir, nameA), dataA, 0o644))
		require.NoError(t, afero.WriteFile(fsys, filepath.Join(confDir, nameB), dataB, 0o644))
		marked := generatedIn(t, fsys)
		inst := &Installer{Fs: fsys, Cfg: Config{ConfDir: confDir, ConfName: ownName, Catena: CatenaOptions{CacheDir: "/var/lib/cni/catena"}},
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		st, err := inst.Sync(context.Background())
		if err != nil {
			require.False(t, st.Ready)
			return
		}
		require.True(t, st.Ready)
		files, err := ConfFiles(fsys, confDir)
		require.NoError(t, err)
		require.Equal(t, ownName, files[0], "catena's file sorts first")
		require.Equal(t, []string{ownName}, generatedIn(t, fsys), "exactly one catena file")
		require.False(t, slices.Contains(marked, st.Primary), "wrapped a generated file")
		require.Contains(t, files, st.Primary)
		m, ok := ReadGenerated(generatedFile(t, inst))
		require.True(t, ok)
		require.Equal(t, st.Primary, m.Source)
		data, err := afero.ReadFile(fsys, filepath.Join(confDir, st.Primary))
		require.NoError(t, err)
		_, err = ParsePrimary(st.Primary, data)
		require.NoError(t, err)
		if len(marked) == 0 {
			require.Equal(t, files[1], st.Primary, "not the file the runtime would load")
		}
		again, err := inst.Sync(context.Background())
		require.NoError(t, err)
		require.False(t, again.Wrote)
	})
}
