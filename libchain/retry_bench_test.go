package libchain

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/cache"
)

// storeOnly hides the DiskStore's cache.TeardownIndex, so that an ADD makes
// no opportunistic retry at all: the baseline of BenchmarkAddRetryCheck.
type storeOnly struct{ cache.Store }

// BenchmarkAddRetryCheck measures what the opportunistic teardown retry
// costs an ADD (and its DEL) when nothing is pending, which is the common
// case, on the real disk with the real flock locker and fake delegates:
//
//	go test -run '^$' -bench AddRetryCheck -count 5 ./libchain
//
// "no-retry" hides the teardown index, so the retry is not even looked
// for; "retry-check" is what catena does.
func BenchmarkAddRetryCheck(b *testing.B) {
	for _, variant := range []string{"no-retry", "retry-check"} {
		b.Run(variant, func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "catena")
			var store cache.Store = cache.NewDiskStore(afero.NewOsFs(), dir, cache.NewFlockLocker(filepath.Join(dir, cache.LocksDir)))
			if variant == "no-retry" {
				store = storeOnly{store}
			}
			eng := &Engine{Store: store, Exec: newFakeExec()}
			conf := chainConf(b, "1.1.0", dIPAM, dPort, dTune)
			conf.CacheDir = dir
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r := req(conf, fmt.Sprintf("c%d", i))
				if _, err := eng.Add(ctx, r); err != nil {
					b.Fatal(err)
				}
				if err := eng.Del(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
