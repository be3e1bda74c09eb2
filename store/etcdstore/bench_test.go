package etcdstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
	"github.com/setpointhq/setpoint/store/storetest"
	"github.com/setpointhq/setpoint/target"
)

// BenchmarkDecide64 records decisions of 1,000 targets from 64×GOMAXPROCS goroutines,
// on etcd (a 3-member cluster on loopback, fsync off) and, in the same
// run, on a bbolt file, so the two can be compared.
func BenchmarkDecide64(b *testing.B) {
	for _, backend := range []string{"bolt", "etcd"} {
		b.Run(backend, func(b *testing.B) {
			var st store.Store
			if backend == "bolt" {
				bs, err := boltstore.Open(b.TempDir()+"/b.db", boltstore.Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer bs.Close()
				st = bs
			} else {
				st = openB(b)
			}
			var n atomic.Int64
			b.SetParallelism(64)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					key := target.Key{Cluster: "c", Namespace: "n", Name: fmt.Sprint(i % 1000)}
					if _, err := st.Update(context.Background(), key, storetest.DecideFn(fmt.Sprint("d", i))); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
