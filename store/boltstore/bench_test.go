package boltstore_test

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/store/boltstore"
	"github.com/setpointhq/setpoint/target"
)

// BenchmarkUpdate measures decisions per second on a real file, fsync
// included: each op is one Update of a realistic record (a full spec,
// status and decision, a short history). callers goroutines update
// distinct targets; commits/op shows how many decisions share an fsync,
// cpu-µs/op the process's CPU time (user and system) per Update. With
// delay=off the committer does not wait for Updates being prepared
// (Options.MaxBatchDelay < 0): the same run's comparison for group commit.
// With decide, each Update is
// a decision (Decide), as the server's Recommend makes it: it
// replaces the last decision, so it also writes the decision log and the
// feed's decision entry.
func BenchmarkUpdate(b *testing.B) {
	for _, bc := range []struct {
		callers int
		delay   time.Duration
		targets int // per caller, updated in turn; 0 is 1
		decide  bool
	}{{1, 0, 0, false}, {64, 0, 0, false}, {64, -1, 0, false}, {64, 0, 16, false}, {64, 0, 0, true}, {64, 0, 16, true}} {
		name := fmt.Sprintf("callers=%d", bc.callers)
		if bc.targets > 0 {
			name += fmt.Sprintf("/targets=%d", bc.callers*bc.targets)
		}
		if bc.delay < 0 {
			name += "/delay=off"
		}
		if bc.decide {
			name += "/decide"
		}
		opts := boltstore.Options{MaxBatchDelay: bc.delay}
		b.Run(name, func(b *testing.B) {
			callers := bc.callers
			st := open(b, newPath(b), opts)
			ctx := context.Background()
			write := st.Update
			if bc.decide {
				write = st.Decide
			}
			var wg sync.WaitGroup
			cpu0, pages0 := processCPU(b), boltstore.PageWrites(st)
			b.ResetTimer()
			for c := range callers {
				n := b.N / callers
				if c < b.N%callers {
					n++
				}
				keys := make([]target.Key, max(bc.targets, 1))
				for t := range keys {
					keys[t] = target.Key{Cluster: "bench", Namespace: "ns", Name: fmt.Sprintf("target-%03d-%02d", c, t)}
				}
				wg.Go(func() {
					for i := range n {
						key := keys[i%len(keys)]
						_, err := write(ctx, key, func(r *target.Record) error {
							if r.LastSeen.IsZero() {
								*r = fullRecord(key)
							}
							h := &r.History.Recommendations
							rec := engine.Recommendation{Replicas: int32(i % 10), At: at(i * 15)}
							if len(*h) < 20 {
								*h = append(*h, rec)
							} else {
								(*h)[i%20] = rec // as the engine overwrites outdated entries
							}
							r.LastSeen = at(i * 15)
							if bc.decide {
								d := loggedDecision(r.LastSeen, int32(i%10))
								r.Last = &target.LastDecision{ID: fmt.Sprintf("d-%d-%d", c, i), At: r.LastSeen, Decision: d.decision(), From: 3}
								r.Last.Decision.Status = r.Status
							}
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
			b.ReportMetric(float64(boltstore.PageWrites(st)-pages0)/float64(b.N), "pagewrites/op")
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
		})
	}
}

// processCPU is the CPU time the process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
