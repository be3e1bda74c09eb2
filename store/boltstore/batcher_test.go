package boltstore_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/setpointhq/setpoint/store/boltstore"
	"github.com/setpointhq/setpoint/target"
)

// TestGroupCommitWaitsForExpectedWrites runs in a synctest bubble, where
// the clock moves only when every goroutine is blocked. A queued write is
// held while another write is announced (Expect) and committed the moment
// that one is taken off — after it queued, or without writing; only a
// write that never comes holds it for the whole MaxBatchDelay. The count
// of announced writes never goes below zero.
func TestGroupCommitWaitsForExpectedWrites(t *testing.T) {
	const delay = 5 * time.Millisecond
	key := func(name string) target.Key { return target.Key{Cluster: "c", Namespace: "n", Name: name} }
	for _, tc := range []struct {
		name string
		// arrive does what the announced call does once the first write
		// is queued and held.
		arrive      func(t *testing.T, st *boltstore.Store)
		wantCommits uint64
		wantWrites  uint64
		wantWait    time.Duration // of the held write, by the bubble's clock
	}{
		{
			name: "joins the batch",
			arrive: func(t *testing.T, st *boltstore.Store) {
				done := make(chan struct{})
				go func() {
					defer close(done)
					if _, err := st.Update(context.Background(), key("b"), appendRecommendation(2)); err != nil {
						t.Errorf("Update(b): %v", err)
					}
				}()
				synctest.Wait()
				if q := boltstore.QueueLen(st); q != 2 {
					t.Errorf("queue %d, want both writes held while one is announced", q)
				}
				st.Expect(-1)
				<-done
			},
			wantCommits: 1, wantWrites: 2, wantWait: 0,
		},
		{
			name:        "taken off without writing",
			arrive:      func(_ *testing.T, st *boltstore.Store) { st.Expect(-1) },
			wantCommits: 1, wantWrites: 1, wantWait: 0,
		},
		{
			name:        "never comes",
			arrive:      nil, // taken off only after the held write returned
			wantCommits: 1, wantWrites: 1, wantWait: delay,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := newPath(t)
			synctest.Test(t, func(t *testing.T) {
				st, err := boltstore.Open(path, boltstore.Options{MaxBatchDelay: delay})
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				st.Expect(1)
				start := time.Now()
				held := make(chan time.Duration)
				go func() {
					if _, err := st.Update(context.Background(), key("a"), appendRecommendation(1)); err != nil {
						t.Errorf("Update(a): %v", err)
					}
					held <- time.Since(start)
				}()
				synctest.Wait()
				if q, s := boltstore.QueueLen(st), st.Stats(); q != 1 || s.Commits != 0 {
					t.Fatalf("queue %d, %+v: want the write held in the queue while another is announced", q, s)
				}
				var waited time.Duration
				if tc.arrive != nil {
					arrived := make(chan struct{})
					go func() { tc.arrive(t, st); close(arrived) }()
					waited = <-held
					<-arrived
				} else {
					waited = <-held
					st.Expect(-1)
				}
				if waited != tc.wantWait {
					t.Errorf("the held write waited %v of the bubble's clock, want %v", waited, tc.wantWait)
				}
				if s := st.Stats(); s.Commits != tc.wantCommits || s.Writes != tc.wantWrites {
					t.Errorf("Stats() = %+v, want %d writes in %d commits", s, tc.wantWrites, tc.wantCommits)
				}
				if n := boltstore.Expected(st); n != 0 {
					t.Errorf("Expected() = %d after every write was taken off, want 0", n)
				}
				st.Expect(-3)
				st.Expect(1)
				if n := boltstore.Expected(st); n != 1 {
					t.Errorf("Expected() = %d after Expect(-3) on none and Expect(1), want 1 (never below zero)", n)
				}
			})
			checkFile(t, path)
		})
	}
}

// TestGroupCommitHoldsABusyStoreWhileItsQueueGrows: with nothing coming, a
// busy store (its last commit carried several writes) holds its batch only
// while the queue keeps growing — until it has not grown for
// MaxBatchDelay/8 (calls the server has not started handling yet, waiting
// for a processor, are not announced) — a store that is not busy holds
// nothing, and after a heavy commit (HeavyBatch writes) the next batch is
// held for the whole delay.
func TestGroupCommitHoldsABusyStoreWhileItsQueueGrows(t *testing.T) {
	const delay = 5 * time.Millisecond
	grace := boltstore.BatchGrace(delay)
	path := newPath(t)
	synctest.Test(t, func(t *testing.T) {
		st, err := boltstore.Open(path, boltstore.Options{MaxBatchDelay: delay})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ctx := context.Background()
		key := func(name string) target.Key { return target.Key{Cluster: "c", Namespace: "n", Name: name} }
		// update runs an Update of name after sleeping for after, and
		// sends how long after start it returned.
		update := func(start time.Time, name string, after time.Duration, took chan<- time.Duration) {
			time.Sleep(after)
			if _, err := st.Update(ctx, key(name), appendRecommendation(1)); err != nil {
				t.Errorf("Update(%s): %v", name, err)
			}
			took <- time.Since(start)
		}

		// A commit of two writes: b joins while it is announced.
		st.Expect(1)
		done := make(chan error, 2)
		go func() { _, err := st.Update(ctx, key("a"), appendRecommendation(1)); done <- err }()
		synctest.Wait()
		go func() { _, err := st.Update(ctx, key("b"), appendRecommendation(2)); done <- err }()
		synctest.Wait()
		st.Expect(-1)
		for range 2 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}

		// Busy: writes queued grace/2 apart share a commit made grace
		// after the last of them.
		start := time.Now()
		took := make(chan time.Duration, 3)
		for i, name := range []string{"c", "d", "e"} {
			go update(start, name, time.Duration(i)*grace/2, took)
		}
		for range 3 {
			if d := <-took; d != 2*grace {
				t.Errorf("a write of a growing queue returned after %v of the bubble's clock, want %v", d, 2*grace)
			}
		}
		if s := st.Stats(); s.Commits != 2 || s.MaxBatch != 3 {
			t.Fatalf("Stats() = %+v, want the three writes in one more commit", s)
		}

		// Still busy: a lone write waits grace; then, after a commit of one,
		// the next is committed at once.
		for _, want := range []time.Duration{grace, 0} {
			start := time.Now()
			go update(start, "f", 0, took)
			if d := <-took; d != want {
				t.Errorf("a lone update took %v of the bubble's clock, want %v", d, want)
			}
		}

		// A heavy commit (HeavyBatch writes, held while one more was
		// announced): the next batch is held for the whole delay.
		st.Expect(1)
		heavy := make(chan time.Duration, boltstore.HeavyBatch)
		start = time.Now()
		for i := range boltstore.HeavyBatch {
			go update(start, fmt.Sprintf("h-%02d", i), 0, heavy)
		}
		synctest.Wait()
		st.Expect(-1)
		for range boltstore.HeavyBatch {
			if d := <-heavy; d != 0 {
				t.Errorf("a write of the heavy batch took %v of the bubble's clock, want 0", d)
			}
		}
		if s := st.Stats(); s.MaxBatch != boltstore.HeavyBatch {
			t.Fatalf("Stats() = %+v, want a commit of %d writes", s, boltstore.HeavyBatch)
		}
		start = time.Now()
		go update(start, "g", 0, took)
		if d := <-took; d != delay {
			t.Errorf("a lone update after a heavy commit took %v of the bubble's clock, want %v", d, delay)
		}
	})
	checkFile(t, path)
}
