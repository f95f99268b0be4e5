package reconcile

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkPass: one reconcile pass over records spread over 10 networks
// (one attachment per sandbox and network) with 1,000 sandboxes listed, 5%
// of the containers without a sandbox (their marks wait: grace is long).
// The 1,000- and 10,000-record runs show the cost per record is flat: no
// step is quadratic. Run with -benchmem.
func BenchmarkPass(b *testing.B) {
	for _, records := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("records=%d", records), func(b *testing.B) {
			w := newWorld(b)
			w.opts.Grace = 24 * time.Hour
			w.clock = time.Now().Add(48 * time.Hour)
			const networks = 10
			perNet := records / networks
			var listed []string
			for c := range perNet {
				cid := fmt.Sprintf("sandbox%05d", c)
				if c%20 != 0 {
					listed = append(listed, cid)
				}
				for n := range networks {
					rec := record(cid, true)
					rec.Key.Network = fmt.Sprintf("net%d", n)
					require.NoError(b, w.store.Save(rec))
				}
			}
			for i := len(listed); i < 1000; i++ {
				listed = append(listed, fmt.Sprintf("other%05d", i))
			}
			w.rt.set(listed...)
			r := w.reconciler()
			first, err := r.Pass(context.Background())
			require.NoError(b, err)
			require.Equal(b, records/20, first.Marked)
			b.ResetTimer()
			for b.Loop() {
				rep, err := r.Pass(context.Background())
				if err != nil || rep.Candidates != records/20 || rep.Records != records {
					b.Fatalf("pass: %v, %d candidates, %d records", err, rep.Candidates, rep.Records)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(records), "ns/record")
		})
	}
}
