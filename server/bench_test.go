package server_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
	"github.com/setpointhq/setpoint/target"
)

// BenchmarkRecommend measures Recommend round trips with 10-pod requests
// over real TCP into a real bbolt file (fsync per commit), at 1 and 64
// concurrent callers. Each caller decides its own target (as many agents
// and autoscalers would); the clock advances 6 minutes per call so that
// every history stays at its steady-state size. ns/op is wall time per
// decision, so throughput is 1e9/ns_op decisions per second; cpu-µs/op is
// the process's CPU time (user and system: callers, server and store) per
// decision, which other load on the machine changes less than ns/op.
func BenchmarkRecommend(b *testing.B) {
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			ts := recommendCalls(b, callers, nil)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
			if bolt, ok := ts.store.(*boltstore.Store); ok {
				st := bolt.Stats()
				b.ReportMetric(float64(st.Writes)/float64(max(st.Commits, 1)), "writes/commit")
			}
		})
	}
}

// BenchmarkRecommendHandler is BenchmarkRecommend at 64 callers with the
// store's part left out: its Decide runs the decision on a record kept in
// memory (memoryUpdates), with no encoding, no transaction and no fsync.
// What it measures is the callers, the transport, the interceptor chain,
// the conversions, the engine and the response: the server's own share of
// a durable call, which the store's share would otherwise drown.
func BenchmarkRecommendHandler(b *testing.B) {
	recommendCalls(b, 64, func(s store.Store) store.Store {
		return &memoryUpdates{Store: s, recs: map[target.Key]*target.Record{}}
	})
}

// recommendCalls starts a server on the store wrap makes of the real one
// (nil: the real one) and makes b.N Recommend calls of 10 pods from
// callers goroutines, each deciding its own target; it reports cpu-µs/op
// and returns the server.
func recommendCalls(b *testing.B, callers int, wrap func(store.Store) store.Store) *testServer {
	var ticks atomic.Int64
	now := func() time.Time { return t0.Add(time.Duration(ticks.Add(1)) * 6 * time.Minute) }
	ts := start(b, setup{opts: server.Options{Now: now, MaxInFlightRecommends: 1024}, wrap: wrap})
	c := ts.client(b)
	reqs := make([]*setpointv1.RecommendRequest, callers)
	for i := range reqs {
		reqs[i] = request(fmt.Sprintf("web-%d", i), 10, t0)
	}
	var next atomic.Int64
	cpu0 := processCPU(b)
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if _, err := c.Recommend(b.Context(), reqs[i]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	return ts
}

// processCPU returns the CPU time the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// memoryUpdates is a store whose Update and Decide keep records in memory,
// one at a time (the benchmark's callers decide distinct targets).
type memoryUpdates struct {
	store.Store
	mu   sync.Mutex
	recs map[target.Key]*target.Record
}

// Update runs fn on key's record, kept in memory.
func (m *memoryUpdates) Update(_ context.Context, key target.Key, fn func(*target.Record) error) (target.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.recs[key]
	if rec == nil {
		rec = &target.Record{Key: key}
		m.recs[key] = rec
	}
	if err := fn(rec); err != nil {
		return target.Record{}, err
	}
	return *rec, nil
}

// Decide is Update: the record is in memory, so there is nothing to leave
// undecoded.
func (m *memoryUpdates) Decide(ctx context.Context, key target.Key, fn func(*target.Record) error) (target.Record, error) {
	return m.Update(ctx, key, fn)
}
