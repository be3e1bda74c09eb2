package boltstore_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/setpointhq/setpoint/store/boltstore"
	"github.com/setpointhq/setpoint/target"
)

// TestLoneUpdateDoesNotWait runs in a synctest bubble, where the clock moves
// only when every goroutine is blocked: were a lone write held for company
// by a timer (as bbolt's DB.Batch does, for MaxBatchDelay), the bubble's
// clock would advance by that delay. It must not move at all.
func TestLoneUpdateDoesNotWait(t *testing.T) {
	path := newPath(t)
	synctest.Test(t, func(t *testing.T) {
		st, err := boltstore.Open(path, boltstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
		start := time.Now()
		for i := range 3 {
			if _, err := st.Update(context.Background(), key, appendRecommendation(int32(i))); err != nil {
				t.Fatal(err)
			}
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("three lone updates took %v of the bubble's clock, want 0: something waits on a timer", d)
		}
		if s := st.Stats(); s.Commits != 3 || s.Writes != 3 {
			t.Errorf("Stats() = %+v, want each lone update committed on its own", s)
		}
	})
	checkFile(t, path)
}

// TestGroupCommitWaitsForPreparingUpdates: a write queued while another
// Update is still being prepared waits for it (in the bubble, without the
// clock moving: the second write's arrival ends the wait), and the two
// share one commit. When the other Update takes longer than MaxBatchDelay
// the queued write is committed alone after exactly that delay.
func TestGroupCommitWaitsForPreparingUpdates(t *testing.T) {
	const delay = 5 * time.Millisecond
	for _, tc := range []struct {
		name string
		// late: the preparing Update finishes only after the delay.
		late        bool
		wantCommits uint64
		wantWait    time.Duration // of the queued write, by the bubble's clock
	}{
		{name: "joins", late: false, wantCommits: 1, wantWait: 0},
		{name: "too late", late: true, wantCommits: 2, wantWait: delay},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := newPath(t)
			synctest.Test(t, func(t *testing.T) {
				st, err := boltstore.Open(path, boltstore.Options{MaxBatchDelay: delay})
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				ctx := context.Background()
				slow := target.Key{Cluster: "c", Namespace: "n", Name: "slow"}
				quick := target.Key{Cluster: "c", Namespace: "n", Name: "quick"}
				proceed := make(chan struct{})
				slowDone := make(chan error)
				go func() {
					_, err := st.Update(ctx, slow, func(r *target.Record) error {
						<-proceed // being prepared
						return appendRecommendation(1)(r)
					})
					slowDone <- err
				}()
				synctest.Wait() // the slow update is in its function
				start := time.Now()
				quickDone := make(chan time.Duration)
				go func() {
					if _, err := st.Update(ctx, quick, appendRecommendation(2)); err != nil {
						t.Errorf("quick Update: %v", err)
					}
					quickDone <- time.Since(start)
				}()
				synctest.Wait() // the quick write is queued; the committer waits
				if q, s := boltstore.QueueLen(st), st.Stats(); q != 1 || s.Commits != 0 {
					t.Fatalf("queue %d, %+v: want the quick write held in the queue", q, s)
				}
				var waited time.Duration
				if tc.late {
					waited = <-quickDone
					close(proceed)
				} else {
					close(proceed)
					waited = <-quickDone
				}
				if err := <-slowDone; err != nil {
					t.Fatalf("slow Update: %v", err)
				}
				if waited != tc.wantWait {
					t.Errorf("the queued write waited %v of the bubble's clock, want %v", waited, tc.wantWait)
				}
				if s := st.Stats(); s.Commits != tc.wantCommits || s.Writes != 2 {
					t.Errorf("Stats() = %+v, want 2 writes in %d commits", s, tc.wantCommits)
				}
			})
			checkFile(t, path)
		})
	}
}

// TestGroupCommitHoldsBatchesWhileBusy: after a commit of more than one
// write, a write is held even with nothing being prepared or announced
// (under load most calls in flight are elsewhere), for the grace
// (MaxBatchDelay/8) once the queue stops growing; after a commit of one
// write, the next is committed at once.
func TestGroupCommitHoldsBatchesWhileBusy(t *testing.T) {
	const delay = 5 * time.Millisecond
	path := newPath(t)
	synctest.Test(t, func(t *testing.T) {
		st, err := boltstore.Open(path, boltstore.Options{MaxBatchDelay: delay})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ctx := context.Background()
		key := func(name string) target.Key { return target.Key{Cluster: "c", Namespace: "n", Name: name} }

		// A commit of two writes: b is queued while a is being prepared.
		proceed := make(chan struct{})
		done := make(chan error, 2)
		go func() {
			_, err := st.Update(ctx, key("a"), func(r *target.Record) error { <-proceed; return appendRecommendation(1)(r) })
			done <- err
		}()
		synctest.Wait()
		go func() { _, err := st.Update(ctx, key("b"), appendRecommendation(2)); done <- err }()
		synctest.Wait()
		close(proceed)
		for range 2 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		if s := st.Stats(); s.Commits != 1 || s.MaxBatch != 2 {
			t.Fatalf("Stats() = %+v, want the two writes in one commit", s)
		}

		for i, want := range []time.Duration{boltstore.BatchGrace(delay), 0} {
			start := time.Now()
			if _, err := st.Update(ctx, key("c"), appendRecommendation(int32(3+i))); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d != want {
				t.Errorf("lone update %d took %v of the bubble's clock, want %v", i, d, want)
			}
		}
	})
	checkFile(t, path)
}
