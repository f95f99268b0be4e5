package libchain

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
)

// BenchmarkAddRetryCheck measures what looking for a due retry pass
// (KickRetry after the ADD and after the DEL, as catena does) costs an ADD
// and its DEL when nothing is pending, which is the common case, on the
// real disk with the real flock locker and fake delegates:
//
//	go test -run '^$' -bench AddRetryCheck -count 5 ./libchain
//
// "no-retry" makes no check; "retry-check" is what catena does (the kicker
// here only counts: nothing is pending, so it is never called).
func BenchmarkAddRetryCheck(b *testing.B) {
	for _, variant := range []string{"no-retry", "retry-check"} {
		b.Run(variant, func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "catena")
			store := diskStore(dir)
			eng := &Engine{Store: store, Exec: newFakeExec()}
			kicks := &countKicker{}
			if variant == "retry-check" {
				eng.Retrier = kicks
			}
			conf := chainConf(b, "1.1.0", dIPAM, dPort, dTune)
			conf.CacheDir = dir
			conf.DelegateTimeout = 10 * time.Second // the fakes' 200 ms fails under load
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r := req(conf, fmt.Sprintf("c%d", i))
				if _, err := eng.Add(ctx, r); err != nil {
					b.Fatal(err)
				}
				eng.KickRetry(r)
				if err := eng.Del(ctx, r); err != nil {
					b.Fatal(err)
				}
				eng.KickRetry(r)
			}
			if kicks.n != 0 {
				b.Fatalf("%d kicks with nothing pending", kicks.n)
			}
		})
	}
}

// BenchmarkKickRetry measures the check alone, which the ADD and DEL above
// are too noisy to resolve: "nothing-pending" (no pending dir, the common
// case: one failed lstat) and "stamp-not-due" (a stamp whose time has not
// come: an lstat and a read of the stamp), on the real disk:
//
//	go test -run '^$' -bench KickRetry -benchmem -count 5 ./libchain
func BenchmarkKickRetry(b *testing.B) {
	for _, variant := range []string{"nothing-pending", "stamp-not-due"} {
		b.Run(variant, func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "catena")
			store := diskStore(dir)
			kicks := &countKicker{}
			eng := &Engine{Store: store, Exec: newFakeExec(), Retrier: kicks}
			conf := chainConf(b, "1.1.0", dIPAM, dPort, dTune)
			conf.CacheDir = dir
			r := req(conf, "c0")
			if variant == "stamp-not-due" {
				key := cache.Key{Network: conf.Name, ContainerID: "held", IfName: "eth0"}
				require.NoError(b, store.NotePending(key, cache.PendingNote{Due: time.Now().Add(time.Hour), Attempts: 1}))
				_, err := store.StampRetry(conf.Name, time.Now, 2*time.Hour)
				require.NoError(b, err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				eng.KickRetry(r)
			}
			b.StopTimer()
			if kicks.n != 0 {
				b.Fatalf("%d kicks with nothing due", kicks.n)
			}
		})
	}
}
