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

// TestStatsFollowCommits: concurrent updates share commits (never more
// commits than writes), every commit is observed once with its writes and
// a positive duration, and the file size is the file's.
func TestStatsFollowCommits(t *testing.T) {
	const callers, rounds = 20, 3
	var (
		mu       sync.Mutex
		observed []boltstore.Commit
	)
	st := open(t, newPath(t), boltstore.Options{ObserveCommit: func(c boltstore.Commit) {
		mu.Lock()
		observed = append(observed, c)
		mu.Unlock()
	}})
	ctx := context.Background()
	key := func(i int) target.Key { return target.Key{Cluster: "c", Namespace: "n", Name: fmt.Sprint("web-", i)} }
	for round := range rounds {
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
}
