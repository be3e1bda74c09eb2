package store_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
)

func TestRunExpiry(t *testing.T) {
	st := open(t, newPath(t), store.Options{})
	put(t, st, target.Record{Key: target.Key{Cluster: "c", Namespace: "n", Name: "old"}, LastSeen: at(0)})
	put(t, st, target.Record{Key: target.Key{Cluster: "c", Namespace: "n", Name: "new"}, LastSeen: at(3600)})

	ctx, cancel := context.WithCancel(context.Background())
	type pass struct {
		removed int
		err     error
	}
	passes := make(chan pass, 1)
	done := make(chan error)
	go func() {
		done <- store.RunExpiry(ctx, st, store.ExpiryOptions{
			Every:   time.Hour, // only the first pass runs in this test
			MaxIdle: 30 * time.Minute,
			Now:     func() time.Time { return at(3600) },
			Report:  func(n int, err error) { passes <- pass{n, err} },
		})
	}()
	if got := <-passes; got.removed != 1 || got.err != nil {
		t.Errorf("first pass = %+v, want 1 removed", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("RunExpiry after cancel: %v, want nil", err)
	}
	if _, err := st.Get(context.Background(), target.Key{Cluster: "c", Namespace: "n", Name: "new"}); err != nil {
		t.Errorf("Get(new): %v", err)
	}

	if err := store.RunExpiry(context.Background(), st, store.ExpiryOptions{Every: time.Minute}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("RunExpiry without MaxIdle: %v, want ErrInvalid", err)
	}
	st.Close()
	err := store.RunExpiry(context.Background(), st, store.ExpiryOptions{Every: time.Minute, MaxIdle: time.Minute})
	if !errors.Is(err, store.ErrClosed) {
		t.Errorf("RunExpiry on a closed store: %v, want ErrClosed", err)
	}
}

// TestLoneUpdateDoesNotWait runs in a synctest bubble, where the clock moves
// only when every goroutine is blocked: were a lone write held for company
// by a timer (as bbolt's DB.Batch does, for MaxBatchDelay), the bubble's
// clock would advance by that delay. It must not move at all.
func TestLoneUpdateDoesNotWait(t *testing.T) {
	path := newPath(t)
	synctest.Test(t, func(t *testing.T) {
		st, err := store.Open(path, store.Options{})
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
