package store_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
)

// listAll pages through q with page size size and returns the keys seen
// and how many pages it took.
func listAll(t *testing.T, st store.Store, q store.Query, size int) (keys []target.Key, pages int) {
	t.Helper()
	q.PageSize = size
	for {
		recs, next, err := st.List(context.Background(), q)
		if err != nil {
			t.Fatalf("List(%+v): %v", q, err)
		}
		pages++
		for _, r := range recs {
			keys = append(keys, r.Key)
		}
		if next == "" {
			return keys, pages
		}
		if len(recs) != size {
			t.Fatalf("List(%+v) returned a short page of %d with a next token", q, len(recs))
		}
		q.PageToken = next
	}
}

func TestList(t *testing.T) {
	st := open(t, newPath(t), store.Options{})
	// Stored out of order; "c" is a prefix of "c1" as a string but not as a
	// cluster, and a NUL byte sorts before every other byte.
	all := []target.Key{
		{Cluster: "c", Namespace: "a", Name: "x"},
		{Cluster: "c", Namespace: "b", Name: "x"},
		{Cluster: "c\x00", Namespace: "a", Name: "x"},
		{Cluster: "c1", Namespace: "a", Name: "x"},
		{Cluster: "c1", Namespace: "a", Name: "y"},
		{Cluster: "c1", Namespace: "ab", Name: "x"},
		{Cluster: "c1", Namespace: "b", Name: "x"},
		{Cluster: "c2", Namespace: "a", Name: "x"},
	}
	for _, i := range []int{5, 0, 7, 2, 4, 1, 6, 3} {
		put(t, st, target.Record{Key: all[i], LastSeen: at(i)})
	}

	for _, tc := range []struct {
		name  string
		q     store.Query
		size  int
		want  []target.Key
		pages int
	}{
		{"everything, default page", store.Query{}, 0, all, 1},
		{"everything, pages of 3", store.Query{}, 3, all, 3},
		{"everything, pages of 1", store.Query{}, 1, all, 8},
		{"pages of exactly the size", store.Query{}, 4, all, 2},
		{"one cluster", store.Query{Cluster: "c"}, 1, all[0:2], 2},
		{"cluster with a NUL byte", store.Query{Cluster: "c\x00"}, 0, all[2:3], 1},
		{"another cluster", store.Query{Cluster: "c1"}, 3, all[3:7], 2},
		{"one namespace", store.Query{Cluster: "c1", Namespace: "a"}, 1, all[3:5], 2},
		{"no such cluster", store.Query{Cluster: "c3"}, 0, nil, 1},
		{"page size above the maximum", store.Query{}, store.MaxPageSize + 1, all, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, pages := listAll(t, st, tc.q, tc.size)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("keys (-want +got):\n%s", diff)
			}
			if pages != tc.pages {
				t.Errorf("%d pages, want %d", pages, tc.pages)
			}
		})
	}
}

func TestListRejectsBadQueries(t *testing.T) {
	st := open(t, newPath(t), store.Options{})
	for _, k := range []string{"a", "b", "c"} {
		put(t, st, target.Record{Key: target.Key{Cluster: k, Namespace: "n", Name: "x"}, LastSeen: at(0)})
	}
	_, tokenOfAll, err := st.List(context.Background(), store.Query{PageSize: 1})
	if err != nil || tokenOfAll == "" {
		t.Fatalf("List: token %q, %v", tokenOfAll, err)
	}
	for _, tc := range []struct {
		name string
		q    store.Query
	}{
		{"namespace without cluster", store.Query{Namespace: "n"}},
		{"negative page size", store.Query{PageSize: -1}},
		{"token not base64", store.Query{PageToken: "!!"}},
		{"token of another cluster", store.Query{Cluster: "b", PageToken: tokenOfAll}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, next, err := st.List(context.Background(), tc.q)
			if !errors.Is(err, store.ErrInvalid) || recs != nil || next != "" {
				t.Errorf("List(%+v) = %d records, %q, %v; want ErrInvalid", tc.q, len(recs), next, err)
			}
		})
	}
}

func TestExpire(t *testing.T) {
	st := open(t, newPath(t), store.Options{})
	ctx := context.Background()
	key := func(i int) target.Key { return target.Key{Cluster: "c", Namespace: "n", Name: string(rune('a' + i))} }
	for i := range 5 {
		put(t, st, target.Record{Key: key(i), LastSeen: at(i * 60)})
	}
	put(t, st, target.Record{Key: key(5)}) // LastSeen never set
	// Seen again: its index entry moves from 0 to 600.
	if _, err := st.Update(ctx, key(0), func(r *target.Record) error { r.LastSeen = at(600); return nil }); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		cutoff time.Time
		want   int
		left   []int
	}{
		{cutoff: at(-1), want: 1, left: []int{0, 1, 2, 3, 4}}, // only the zero LastSeen
		{cutoff: at(120), want: 1, left: []int{0, 2, 3, 4}},   // cutoff itself is kept
		{cutoff: at(120), want: 0, left: []int{0, 2, 3, 4}},
		{cutoff: at(599), want: 3, left: []int{0}},
		{cutoff: at(601), want: 1, left: nil},
	} {
		n, err := st.Expire(ctx, tc.cutoff)
		if err != nil || n != tc.want {
			t.Errorf("Expire(%v) = %d, %v; want %d", tc.cutoff, n, err, tc.want)
		}
		got, _ := listAll(t, st, store.Query{}, 0)
		var want []target.Key
		for _, i := range tc.left {
			want = append(want, key(i))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("after Expire(%v) (-want +got):\n%s", tc.cutoff, diff)
		}
	}
}

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
