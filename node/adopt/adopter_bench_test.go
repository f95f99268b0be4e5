package adopt

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/internal/libcnitest"
)

// benchEntries is the size of the results dir of BenchmarkAdopterPass: a
// busy node's pods.
const benchEntries = 400

// BenchmarkAdopterPass measures one pass over a results dir of 400 entries
// of the primary's network, as libcni wrote them:
//   - settled: every entry adopted by an earlier pass of the same Adopter;
//     the cost of the pass the agent now runs every resync and watch event;
//   - unsettled: a new Adopter, every record present; what each pass would
//     cost without settling (each entry read, parsed, locked, loaded), and
//     the first pass after an agent restart;
//   - adopt all: a new Adopter and an empty cache dir, 400 records written.
func BenchmarkAdopterPass(b *testing.B) {
	root := b.TempDir()
	libcniDir := filepath.Join(root, "libcni")
	list, err := libcni.NetworkConfFromBytes([]byte(libcnitest.PrimaryConf))
	require.NoError(b, err)
	cni := libcni.NewCNIConfigWithCacheDir([]string{"/opt/cni/bin"}, libcniDir, &libcnitest.RecordingExec{})
	for n := range benchEntries {
		p := libcnitest.TestPod
		p.ContainerID = fmt.Sprintf("pod-%04d", n)
		_, err := cni.AddNetworkList(context.Background(), list, p.RT(libcniDir))
		require.NoError(b, err)
	}
	results := filepath.Join(libcniDir, "results")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	newAdopter := func(cacheDir string) *Adopter {
		a, err := New(Options{ResultsDir: results, CacheDir: cacheDir, Logger: quiet})
		require.NoError(b, err)
		return a
	}
	pass := func(a *Adopter, want Report) {
		rep, err := a.Adopt(context.Background(), []byte(libcnitest.PrimaryConf))
		require.NoError(b, err)
		if rep.Adopted != want.Adopted || rep.AlreadyPresent != want.AlreadyPresent || len(rep.Skipped)+len(rep.Refused) > 0 {
			b.Fatalf("pass: %+v, want %+v", rep, want)
		}
	}
	cacheDir := filepath.Join(root, "catena")
	warm := newAdopter(cacheDir)
	pass(warm, Report{Adopted: benchEntries})

	b.Run("settled", func(b *testing.B) {
		for b.Loop() {
			pass(warm, Report{})
		}
	})
	b.Run("unsettled", func(b *testing.B) {
		for b.Loop() {
			pass(newAdopter(cacheDir), Report{AlreadyPresent: benchEntries})
		}
	})
	b.Run("adopt all", func(b *testing.B) {
		n := 0
		for b.Loop() {
			b.StopTimer()
			n++
			dir := filepath.Join(root, fmt.Sprintf("catena-%d", n))
			b.StartTimer()
			pass(newAdopter(dir), Report{Adopted: benchEntries})
			b.StopTimer()
			require.NoError(b, os.RemoveAll(dir))
			b.StartTimer()
		}
	})
}
