package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
)

// fill writes n records, each with a last decision and a history, and
// returns them as the store keeps them.
func fill(t testing.TB, st store.Store, n int) []target.Record {
	t.Helper()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// Written 16 at a time, so the store commits them in shared batches.
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			key := target.Key{Cluster: "c", Namespace: "n", Name: fmt.Sprintf("r-%04d", i)}
			_, err := st.Update(context.Background(), key, func(r *target.Record) error {
				r.LastSeen = t0.Add(time.Duration(i) * time.Second)
				r.Last = &target.LastDecision{ID: fmt.Sprint("d", i), At: r.LastSeen}
				r.History.Recommendations = append(r.History.Recommendations, engine.Recommendation{Replicas: int32(i%9 + 1), At: r.LastSeen})
				return nil
			})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return all(t, st)
}

// all returns every record of st.
func all(t testing.TB, st store.Store) []target.Record {
	t.Helper()
	var out []target.Record
	q := store.Query{PageSize: store.MaxPageSize}
	for {
		page, next, err := st.List(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		if next == "" {
			return out
		}
		q.PageToken = next
	}
}

// More records than one page move whole, several at a time.
func TestCopy(t *testing.T) {
	src := open(t, newPath(t), store.Options{})
	want := fill(t, src, store.MaxPageSize+37)
	dst := open(t, newPath(t), store.Options{})
	n, err := store.Copy(context.Background(), dst, src)
	if err != nil || n != len(want) {
		t.Fatalf("Copy = %d, %v; want %d", n, err, len(want))
	}
	if diff := cmp.Diff(want, all(t, dst)); diff != "" {
		t.Errorf("copied records (-want +got):\n%s", diff)
	}
}

// failing fails the Update of one key.
type failing struct {
	store.Store
	key target.Key
}

var errRefused = errors.New("refused")

func (f failing) Update(ctx context.Context, key target.Key, fn func(*target.Record) error) (target.Record, error) {
	if key == f.key {
		return target.Record{}, errRefused
	}
	return f.Store.Update(ctx, key, fn)
}

// A write that fails stops the copy with its error, naming the target.
func TestCopyStopsAtFirstError(t *testing.T) {
	src := open(t, newPath(t), store.Options{})
	recs := fill(t, src, 200)
	dst := failing{Store: open(t, newPath(t), store.Options{}), key: recs[50].Key}
	n, err := store.Copy(context.Background(), dst, src)
	if !errors.Is(err, errRefused) || n >= len(recs) {
		t.Fatalf("Copy = %d, %v; want fewer than %d and the refusal", n, err, len(recs))
	}
	if got := len(all(t, dst)); got != n {
		t.Errorf("Copy said it wrote %d, the store holds %d", n, got)
	}
}

// BenchmarkCopy copies 500 records from one bbolt file to another, one at
// a time (the baseline, in the same run) and several at a time.
func BenchmarkCopy(b *testing.B) {
	src := open(b, newPath(b), store.Options{})
	fill(b, src, 500)
	for _, workers := range []int{1, 16} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			defer store.SetCopyWorkers(workers)()
			for b.Loop() {
				b.StopTimer()
				dst, err := store.Open(newPath(b), store.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := store.Copy(context.Background(), dst, src); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				dst.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*500), "µs/record")
		})
	}
}
