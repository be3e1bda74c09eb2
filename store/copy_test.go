package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
	"github.com/setpointhq/setpoint/target"
)

// fill writes n records of cluster "c", each with a last decision and a
// history, and returns them as the store keeps them.
func fill(t testing.TB, st store.Store, n int) []target.Record {
	t.Helper()
	keys := make([]target.Key, n)
	for i := range keys {
		keys[i] = target.Key{Cluster: "c", Namespace: "n", Name: fmt.Sprintf("r-%04d", i)}
	}
	putRecords(t, st, keys...)
	return all(t, st)
}

// putRecords writes a record for each of keys, with a last decision and a
// history, 16 at a time so the store commits them in shared batches.
func putRecords(t testing.TB, st store.Store, keys ...target.Key) {
	t.Helper()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	errs := make(chan error, len(keys))
	sem := make(chan struct{}, 16)
	for i, key := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
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
	src := open(t, newPath(t), boltstore.Options{})
	want := fill(t, src, store.MaxPageSize+37)
	dst := open(t, newPath(t), boltstore.Options{})
	n, err := store.Copy(context.Background(), dst, src, store.CopyOptions{})
	if err != nil || n != len(want) {
		t.Fatalf("Copy = %d, %v; want %d", n, err, len(want))
	}
	if diff := cmp.Diff(want, all(t, dst)); diff != "" {
		t.Errorf("copied records (-want +got):\n%s", diff)
	}
}

// keysOf returns n keys of cluster, in two namespaces.
func keysOf(cluster string, n int) []target.Key {
	keys := make([]target.Key, n)
	for i := range keys {
		keys[i] = target.Key{Cluster: cluster, Namespace: fmt.Sprint("ns-", i%2), Name: fmt.Sprint("web-", i)}
	}
	return keys
}

// clustersOf returns the clusters of recs, in order, each once.
func clustersOf(recs []target.Record) []string {
	var out []string
	for _, r := range recs {
		if len(out) == 0 || out[len(out)-1] != r.Key.Cluster {
			out = append(out, r.Key.Cluster)
		}
	}
	return out
}

// only returns the records of recs whose cluster is one of clusters.
func only(recs []target.Record, clusters ...string) []target.Record {
	var out []target.Record
	for _, r := range recs {
		if slices.Contains(clusters, r.Key.Cluster) {
			out = append(out, r)
		}
	}
	return out
}

// With clusters named, Copy copies exactly their targets (not those of
// cluster "ab", whose name starts with "a"), into a destination that may
// hold other clusters' targets but none of theirs; a destination holding
// some is refused, naming them, and keeps what it held.
func TestCopyClusters(t *testing.T) {
	src := open(t, newPath(t), boltstore.Options{})
	putRecords(t, src, slices.Concat(keysOf("a", 3), keysOf("ab", 2), keysOf("b", store.MaxPageSize+5), keysOf("c", 1))...)
	from := all(t, src)
	for _, tt := range []struct {
		name     string
		clusters []string
		held     []target.Key // in the destination before the copy
		want     []string     // the clusters the destination holds after
		occupied *store.OccupiedError
		invalid  bool
	}{
		{name: "one cluster into an empty store", clusters: []string{"a"}, want: []string{"a"}},
		{name: "more than a page", clusters: []string{"b"}, want: []string{"b"}},
		{name: "two clusters beside a third", clusters: []string{"c", "a"}, held: keysOf("x", 2), want: []string{"a", "c", "x"}},
		{name: "a name given twice counts once", clusters: []string{"c", "c"}, want: []string{"c"}},
		{name: "a cluster the source lacks", clusters: []string{"zz"}, held: keysOf("x", 1), want: []string{"x"}},
		{
			name: "destination holds a named cluster", clusters: []string{"a", "c"}, held: slices.Concat(keysOf("c", 2), keysOf("x", 1)),
			want: []string{"c", "x"}, occupied: &store.OccupiedError{Clusters: map[string]int{"c": 2}, Targets: 2},
		},
		{
			name: "destination holds both", clusters: []string{"a", "c"}, held: slices.Concat(keysOf("a", 1), keysOf("c", 3)),
			want: []string{"a", "c"}, occupied: &store.OccupiedError{Clusters: map[string]int{"a": 1, "c": 3}, Targets: 4},
		},
		{
			name: "whole store into a store with targets", held: keysOf("x", 3),
			want: []string{"x"}, occupied: &store.OccupiedError{Targets: 3},
		},
		{name: "an empty name", clusters: []string{"a", ""}, want: nil, invalid: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dst := open(t, newPath(t), boltstore.Options{})
			putRecords(t, dst, tt.held...)
			before := all(t, dst)
			n, err := store.Copy(context.Background(), dst, src, store.CopyOptions{Clusters: tt.clusters})
			got := all(t, dst)
			if diff := cmp.Diff(tt.want, clustersOf(got)); diff != "" {
				t.Errorf("clusters in the destination (-want +got):\n%s", diff)
			}
			var occ *store.OccupiedError
			switch {
			case tt.invalid:
				if !errors.Is(err, store.ErrInvalid) || n != 0 {
					t.Fatalf("Copy = %d, %v; want 0 and ErrInvalid", n, err)
				}
			case tt.occupied != nil:
				if !errors.As(err, &occ) || n != 0 {
					t.Fatalf("Copy = %d, %v; want 0 and an OccupiedError", n, err)
				}
				if diff := cmp.Diff(tt.occupied, occ); diff != "" {
					t.Errorf("OccupiedError (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(before, got); diff != "" {
					t.Errorf("a refused copy changed the destination (-before +after):\n%s", diff)
				}
			default:
				if err != nil {
					t.Fatalf("Copy: %v", err)
				}
				copied := only(from, tt.clusters...)
				if n != len(copied) {
					t.Errorf("Copy = %d, want %d", n, len(copied))
				}
				if diff := cmp.Diff(copied, only(got, tt.clusters...)); diff != "" {
					t.Errorf("copied records (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(before, only(got, "x")); diff != "" {
					t.Errorf("the destination's other records (-before +after):\n%s", diff)
				}
			}
		})
	}
}

// DeleteClusters deletes exactly the named clusters' targets, more than a
// page of them, and refuses to run without a name or with an empty one
// (which would select every cluster).
func TestDeleteClusters(t *testing.T) {
	for _, tt := range []struct {
		name     string
		clusters []string
		want     int      // deleted
		left     []string // the clusters the store holds after
		invalid  bool
	}{
		{name: "one cluster", clusters: []string{"a"}, want: 3, left: []string{"ab", "b", "c"}},
		{name: "two, one of more than a page", clusters: []string{"b", "c"}, want: store.MaxPageSize + 6, left: []string{"a", "ab"}},
		{name: "a name given twice counts once", clusters: []string{"c", "c"}, want: 1, left: []string{"a", "ab", "b"}},
		{name: "a cluster the store lacks", clusters: []string{"zz"}, want: 0, left: []string{"a", "ab", "b", "c"}},
		{name: "no name", clusters: nil, invalid: true, left: []string{"a", "ab", "b", "c"}},
		{name: "an empty name", clusters: []string{"a", ""}, invalid: true, left: []string{"a", "ab", "b", "c"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := open(t, newPath(t), boltstore.Options{})
			putRecords(t, st, slices.Concat(keysOf("a", 3), keysOf("ab", 2), keysOf("b", store.MaxPageSize+5), keysOf("c", 1))...)
			before := all(t, st)
			n, err := store.DeleteClusters(context.Background(), st, tt.clusters)
			if tt.invalid {
				if !errors.Is(err, store.ErrInvalid) || n != 0 {
					t.Errorf("DeleteClusters = %d, %v; want 0 and ErrInvalid", n, err)
				}
			} else if err != nil || n != tt.want {
				t.Errorf("DeleteClusters = %d, %v; want %d", n, err, tt.want)
			}
			got := all(t, st)
			if diff := cmp.Diff(tt.left, clustersOf(got)); diff != "" {
				t.Errorf("clusters left (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(only(before, tt.left...), got); diff != "" {
				t.Errorf("records left (-want +got):\n%s", diff)
			}
		})
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
	src := open(t, newPath(t), boltstore.Options{})
	recs := fill(t, src, 200)
	dst := failing{Store: open(t, newPath(t), boltstore.Options{}), key: recs[50].Key}
	n, err := store.Copy(context.Background(), dst, src, store.CopyOptions{})
	if !errors.Is(err, errRefused) || n >= len(recs) {
		t.Fatalf("Copy = %d, %v; want fewer than %d and the refusal", n, err, len(recs))
	}
	if got := len(all(t, dst)); got != n {
		t.Errorf("Copy said it wrote %d, the store holds %d", n, got)
	}
}

// unreadable reports the records of one cluster as records List cannot
// decode, as a backend does: left out of the page, one *CorruptError each.
type unreadable struct {
	store.Store
	cluster string
}

func (u unreadable) List(ctx context.Context, q store.Query) ([]target.Record, string, error) {
	recs, next, err := u.Store.List(ctx, q)
	var kept []target.Record
	errs := []error{err}
	for _, r := range recs {
		if r.Key.Cluster != u.cluster {
			kept = append(kept, r)
		} else {
			errs = append(errs, &store.CorruptError{Key: r.Key, Err: errors.New("unreadable")})
		}
	}
	return kept, next, errors.Join(errs...)
}

// Records the destination cannot decode occupy it like any other (each
// counted); a record the source cannot decode fails the copy, which then
// has written nothing of that cluster.
func TestCopyUnreadableRecords(t *testing.T) {
	ctx := context.Background()
	src := open(t, newPath(t), boltstore.Options{})
	putRecords(t, src, keysOf("a", 2)...)
	dst := open(t, newPath(t), boltstore.Options{})
	putRecords(t, dst, slices.Concat(keysOf("a", 3), keysOf("b", 1))...)
	var occ *store.OccupiedError
	n, err := store.Copy(ctx, unreadable{dst, "a"}, src, store.CopyOptions{Clusters: []string{"a"}})
	if !errors.As(err, &occ) || n != 0 {
		t.Fatalf("Copy into unreadable records = %d, %v; want 0 and an OccupiedError", n, err)
	}
	if want := (&store.OccupiedError{Clusters: map[string]int{"a": 3}, Targets: 3}); !cmp.Equal(want, occ) {
		t.Errorf("OccupiedError = %+v, want %+v", occ, want)
	}
	empty := open(t, newPath(t), boltstore.Options{})
	if n, err := store.Copy(ctx, empty, unreadable{src, "a"}, store.CopyOptions{Clusters: []string{"a"}}); !errors.Is(err, store.ErrCorrupt) || n != 0 {
		t.Errorf("Copy from unreadable records = %d, %v; want 0 and ErrCorrupt", n, err)
	}
	if got := all(t, empty); len(got) != 0 {
		t.Errorf("the destination holds %d records after a copy that read none", len(got))
	}
}

// BenchmarkCopy copies 500 records from one bbolt file to another, one at
// a time (the baseline, in the same run) and several at a time.
func BenchmarkCopy(b *testing.B) {
	src := open(b, newPath(b), boltstore.Options{})
	fill(b, src, 500)
	for _, workers := range []int{1, 16} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			defer store.SetCopyWorkers(workers)()
			for b.Loop() {
				b.StopTimer()
				dst, err := boltstore.Open(newPath(b), boltstore.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := store.Copy(context.Background(), dst, src, store.CopyOptions{}); err != nil {
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
