package boltstore_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/setpointhq/setpoint/store/boltstore"
	"github.com/setpointhq/setpoint/target"
)

// TestStatsFollowCommitsAndCache: concurrent updates share commits (never
// more commits than writes), every commit is observed once with its
// writes and a positive duration, the record cache counts a miss for a
// target's first two updates and a hit for its third (it takes a record
// from its key's second miss on), and the file size is the file's.
func TestStatsFollowCommitsAndCache(t *testing.T) {
	const callers, rounds = 20, 3
	tests := []struct {
		name             string
		cacheBytes       int64
		wantHits, wantMs uint64
	}{
		{"with the record cache", 0, callers, 2 * callers},
		{"without the record cache", -1, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				mu       sync.Mutex
				observed []boltstore.Commit
			)
			st := open(t, newPath(t), boltstore.Options{RecordCacheBytes: tt.cacheBytes, ObserveCommit: func(c boltstore.Commit) {
				mu.Lock()
				observed = append(observed, c)
				mu.Unlock()
			}})
			ctx := context.Background()
			key := func(i int) target.Key { return target.Key{Cluster: "c", Namespace: "n", Name: fmt.Sprint("web-", i)} }
			for round := range rounds { // the last round updates the same keys: cache hits
				var wg sync.WaitGroup
				for i := range callers {
					wg.Go(func() {
						if _, err := st.Update(ctx, key(i), appendRecommendation(int32(round))); err != nil {
							t.Errorf("Update %d: %v", i, err)
						}
					})
				}
				wg.Wait()
			}
			s := st.Stats()
			if s.Writes != rounds*callers || s.Commits == 0 || s.Commits > rounds*callers {
				t.Errorf("Stats() = %+v, want %d writes in 1 to %[2]d commits", s, rounds*callers)
			}
			if s.CacheHits != tt.wantHits || s.CacheMisses != tt.wantMs {
				t.Errorf("Stats() cache hits, misses = %d, %d, want %d, %d", s.CacheHits, s.CacheMisses, tt.wantHits, tt.wantMs)
			}
			if s.CommitTime <= 0 || s.HeldTime < 0 {
				t.Errorf("Stats() commit time %v, held time %v, want > 0 and ≥ 0", s.CommitTime, s.HeldTime)
			}
			mu.Lock()
			defer mu.Unlock()
			var writes int
			var took, held int64
			for _, c := range observed {
				if c.Writes < 1 || c.Duration <= 0 {
					t.Errorf("observed %+v, want ≥ 1 write and a positive duration", c)
				}
				writes += c.Writes
				took += int64(c.Duration)
				held += int64(c.Held)
			}
			if uint64(len(observed)) != s.Commits || uint64(writes) != s.Writes || took != int64(s.CommitTime) || held != int64(s.HeldTime) {
				t.Errorf("observed %d commits of %d writes (%v, held %v), Stats() = %+v", len(observed), writes, took, held, s)
			}
			fi, err := os.Stat(st.Path())
			if err != nil {
				t.Fatal(err)
			}
			if s.FileBytes != fi.Size() || s.FileBytes == 0 {
				t.Errorf("Stats().FileBytes = %d, file is %d bytes", s.FileBytes, fi.Size())
			}
		})
	}
}
