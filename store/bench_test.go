package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
)

// BenchmarkUpdate measures decisions per second on a real file, fsync
// included: each op is one Update of a realistic record (a full spec,
// status and decision, a short history). callers goroutines update
// distinct targets; commits/op shows how many decisions share an fsync.
func BenchmarkUpdate(b *testing.B) {
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			st := open(b, newPath(b), store.Options{})
			ctx := context.Background()
			var wg sync.WaitGroup
			b.ResetTimer()
			for c := range callers {
				n := b.N / callers
				if c < b.N%callers {
					n++
				}
				key := target.Key{Cluster: "bench", Namespace: "ns", Name: fmt.Sprintf("target-%03d", c)}
				base := fullRecord(key)
				wg.Go(func() {
					for i := range n {
						_, err := st.Update(ctx, key, func(r *target.Record) error {
							if r.LastSeen.IsZero() {
								*r = base
							}
							h := &r.History.Recommendations
							rec := engine.Recommendation{Replicas: int32(i % 10), At: at(i * 15)}
							if len(*h) < 20 {
								*h = append(*h, rec)
							} else {
								(*h)[i%20] = rec // as the engine overwrites outdated entries
							}
							r.LastSeen = at(i * 15)
							return nil
						})
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			s := st.Stats()
			b.ReportMetric(float64(s.Commits)/float64(b.N), "commits/op")
		})
	}
}
