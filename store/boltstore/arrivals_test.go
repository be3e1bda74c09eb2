package boltstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
	"github.com/setpointhq/setpoint/target"
)

// TestGroupCommitWaitsForArrivals runs in a synctest bubble, where the clock
// moves only when every goroutine is blocked. With Options.Arrivals, a
// queued write is held while another write is on its way (counted by
// Arrive, not yet at the store) and committed the moment that one has
// queued, has been counted off without writing, or waits for the queued
// write's key; only a write that never comes holds it for the whole
// MaxBatchDelay. A busy store with nothing coming does not wait at all.
func TestGroupCommitWaitsForArrivals(t *testing.T) {
	const delay = 5 * time.Millisecond
	key := func(name string) target.Key { return target.Key{Cluster: "c", Namespace: "n", Name: name} }
	for _, tc := range []struct {
		name string
		// arrive, given the context of the write on its way, does what
		// that call does once the first write is queued and held.
		arrive      func(t *testing.T, st *boltstore.Store, a *boltstore.Arrivals, ctx context.Context)
		wantCommits uint64
		wantWrites  uint64
		wantWait    time.Duration // of the held write, by the bubble's clock
	}{
		{
			name: "joins the batch",
			arrive: func(t *testing.T, st *boltstore.Store, _ *boltstore.Arrivals, ctx context.Context) {
				if _, err := st.Update(ctx, key("b"), appendRecommendation(2)); err != nil {
					t.Errorf("Update(b): %v", err)
				}
			},
			wantCommits: 1, wantWrites: 2, wantWait: 0,
		},
		{
			name:        "ends without writing",
			arrive:      func(_ *testing.T, _ *boltstore.Store, a *boltstore.Arrivals, ctx context.Context) { a.Depart(ctx) },
			wantCommits: 1, wantWrites: 1, wantWait: 0,
		},
		{
			name: "waits for the held write's key",
			arrive: func(t *testing.T, st *boltstore.Store, _ *boltstore.Arrivals, ctx context.Context) {
				if _, err := st.Update(ctx, key("a"), appendRecommendation(2)); err != nil {
					t.Errorf("Update(a) on its way: %v", err)
				}
			},
			wantCommits: 2, wantWrites: 2, wantWait: 0,
		},
		{
			name:        "never comes",
			arrive:      nil, // counted off only after the held write returned
			wantCommits: 1, wantWrites: 1, wantWait: delay,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := newPath(t)
			synctest.Test(t, func(t *testing.T) {
				arrivals := new(boltstore.Arrivals)
				st, err := boltstore.Open(path, boltstore.Options{MaxBatchDelay: delay, Arrivals: arrivals})
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				ctx := context.Background()
				coming := arrivals.Arrive(ctx)
				start := time.Now()
				held := make(chan time.Duration)
				go func() {
					if _, err := st.Update(ctx, key("a"), appendRecommendation(1)); err != nil {
						t.Errorf("Update(a): %v", err)
					}
					held <- time.Since(start)
				}()
				synctest.Wait()
				if q, s := boltstore.QueueLen(st), st.Stats(); q != 1 || s.Commits != 0 {
					t.Fatalf("queue %d, %+v: want the write held in the queue while another is coming", q, s)
				}
				var waited time.Duration
				if tc.arrive != nil {
					arrived := make(chan struct{})
					go func() { tc.arrive(t, st, arrivals, coming); close(arrived) }()
					waited = <-held
					<-arrived
				} else {
					waited = <-held
					arrivals.Depart(coming)
				}
				if waited != tc.wantWait {
					t.Errorf("the held write waited %v of the bubble's clock, want %v", waited, tc.wantWait)
				}
				if s := st.Stats(); s.Commits != tc.wantCommits || s.Writes != tc.wantWrites {
					t.Errorf("Stats() = %+v, want %d writes in %d commits", s, tc.wantWrites, tc.wantCommits)
				}
				if n := arrivals.Coming(); n != 0 {
					t.Errorf("Coming() = %d after every write arrived, want 0", n)
				}
			})
			checkFile(t, path)
		})
	}
}

// TestGroupCommitWithArrivalsHoldsABusyStoreWhileItsQueueGrows: without
// Arrivals a write that follows a commit of several is held for the whole
// MaxBatchDelay (TestGroupCommitHoldsBatchesWhileBusy). With Arrivals and
// nothing coming, a busy store holds its batch only while the queue keeps
// growing — until it has not grown for MaxBatchDelay/8 (calls the server
// has not started handling yet, waiting for a processor, are not counted
// as coming) — a store that is not busy holds nothing, and after a heavy
// commit (HeavyBatch writes) the next batch is held for the whole delay.
func TestGroupCommitWithArrivalsHoldsABusyStoreWhileItsQueueGrows(t *testing.T) {
	const delay = 5 * time.Millisecond
	grace := boltstore.BatchGrace(delay)
	path := newPath(t)
	synctest.Test(t, func(t *testing.T) {
		arrivals := new(boltstore.Arrivals)
		st, err := boltstore.Open(path, boltstore.Options{MaxBatchDelay: delay, Arrivals: arrivals})
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

		// A commit of two writes: b joins while it is on its way.
		coming := arrivals.Arrive(ctx)
		done := make(chan error, 2)
		go func() { _, err := st.Update(ctx, key("a"), appendRecommendation(1)); done <- err }()
		synctest.Wait()
		go func() { _, err := st.Update(coming, key("b"), appendRecommendation(2)); done <- err }()
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

		// A heavy commit (HeavyBatch writes, held while one more was on its
		// way): the next batch is held for the whole delay.
		coming = arrivals.Arrive(ctx)
		heavy := make(chan time.Duration, boltstore.HeavyBatch)
		start = time.Now()
		for i := range boltstore.HeavyBatch {
			go update(start, fmt.Sprintf("h-%02d", i), 0, heavy)
		}
		synctest.Wait()
		arrivals.Depart(coming)
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

// TestArrivalsServeOneStore: an Arrivals serving an open store is refused
// to another until that store is closed.
func TestArrivalsServeOneStore(t *testing.T) {
	arrivals := new(boltstore.Arrivals)
	first := open(t, newPath(t), boltstore.Options{Arrivals: arrivals})
	if _, err := boltstore.Open(newPath(t), boltstore.Options{Arrivals: arrivals}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Open with an Arrivals in use: %v, want ErrInvalid", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second := open(t, newPath(t), boltstore.Options{Arrivals: arrivals})
	if _, err := second.Update(arrivals.Arrive(context.Background()), target.Key{Cluster: "c", Namespace: "n", Name: "a"}, appendRecommendation(1)); err != nil {
		t.Fatal(err)
	}
	if n := arrivals.Coming(); n != 0 {
		t.Errorf("Coming() = %d after the write reached the store, want 0", n)
	}
	var none *boltstore.Arrivals
	ctx := none.Arrive(context.Background())
	none.Depart(ctx)
	if n := none.Coming(); n != 0 {
		t.Errorf("a nil Arrivals: Coming() = %d, want 0", n)
	}
}
