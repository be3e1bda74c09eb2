package storetest

import (
	"bytes"
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
	"github.com/setpointhq/setpoint/target"
)

func update(t *testing.T, open Opener) {
	ctx := context.Background()
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	errBoom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		fn      func(*target.Record) error
		wantErr error
		want    *target.Record // nil: no record stored
	}{
		{
			name: "new target starts from a zero record with its key",
			fn: func(r *target.Record) error {
				if !cmp.Equal(*r, target.Record{Key: key}) {
					return fmt.Errorf("fn got %+v", *r)
				}
				r.LastSeen = at(0)
				return nil
			},
			want: &target.Record{Key: key, LastSeen: at(0)},
		},
		{
			name:    "fn error stores nothing",
			fn:      func(r *target.Record) error { r.LastSeen = at(0); return errBoom },
			wantErr: errBoom,
		},
		{
			name: "the key fn leaves is ignored",
			fn: func(r *target.Record) error {
				r.Key = target.Key{Name: "other"}
				r.LastSeen = at(0)
				return nil
			},
			want: &target.Record{Key: key, LastSeen: at(0)},
		},
		{
			name:    "a string that is not UTF-8 is refused",
			fn:      func(r *target.Record) error { r.Ref.Name = "\xff"; return nil },
			wantErr: errAny,
		},
		{
			name:    "a time a timestamp cannot hold is refused",
			fn:      func(r *target.Record) error { r.LastSeen = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC); return nil },
			wantErr: errAny,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := open(t)
			got, err := st.Update(ctx, key, tc.fn)
			switch {
			case tc.wantErr == errAny && err == nil, tc.wantErr != errAny && !errors.Is(err, tc.wantErr):
				t.Fatalf("Update: %v, want %v", err, tc.wantErr)
			case err == nil && !cmp.Equal(got, *tc.want):
				t.Errorf("Update returned (-got +want):\n%s", cmp.Diff(got, *tc.want))
			}
			stored, err := st.Get(ctx, key)
			if tc.want == nil {
				if !errors.Is(err, store.ErrNotFound) {
					t.Errorf("Get: %+v, %v; want ErrNotFound", stored, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(*tc.want, stored); diff != "" {
				t.Errorf("stored (-want +got):\n%s", diff)
			}
		})
	}
}

// decide: Decide stores a new decision, shows fn the previous one's ID and
// At, and stores nothing when fn keeps the previous decision or fails.
func decide(t *testing.T, open Opener) {
	ctx := context.Background()
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	st := open(t)
	first, err := st.Decide(ctx, key, func(r *target.Record) error {
		if r.Last != nil {
			return fmt.Errorf("a new target's record has a last decision: %+v", r.Last)
		}
		r.Last = &target.LastDecision{ID: "d1", At: at(0), From: 3}
		r.LastSeen = at(0)
		return nil
	})
	if err != nil {
		t.Fatalf("Decide(first): %v", err)
	}
	if first.Last == nil || first.Last.ID != "d1" || first.Last.From != 3 {
		t.Fatalf("Decide(first) returned last decision %+v; want d1 from 3", first.Last)
	}
	var seen target.LastDecision
	second, err := st.Decide(ctx, key, func(r *target.Record) error {
		if r.Last == nil {
			return errors.New("the previous decision is missing")
		}
		seen = target.LastDecision{ID: r.Last.ID, At: r.Last.At}
		r.Last = &target.LastDecision{ID: "d2", At: at(15), From: 4}
		r.LastSeen = at(15)
		return nil
	})
	if err != nil {
		t.Fatalf("Decide(second): %v", err)
	}
	if want := (target.LastDecision{ID: "d1", At: at(0)}); !cmp.Equal(seen, want) {
		t.Errorf("fn saw the previous decision as %+v; want ID and At %+v", seen, want)
	}
	for _, tc := range []struct {
		name string
		fn   func(*target.Record) error
	}{
		{"fn keeps the previous decision", func(r *target.Record) error { r.LastSeen = at(30); return nil }},
		{"fn fails", func(r *target.Record) error {
			r.Last = &target.LastDecision{ID: "d3", At: at(30)}
			return errors.New("boom")
		}},
	} {
		if _, err := st.Decide(ctx, key, tc.fn); err == nil {
			t.Errorf("%s: Decide returned nil; want an error", tc.name)
		}
		stored, err := st.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(second, stored); diff != "" {
			t.Errorf("%s: stored record changed (-before +after):\n%s", tc.name, diff)
		}
	}
}

func deleteTarget(t *testing.T, open Opener) {
	st := open(t)
	ctx := context.Background()
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	if err := st.Delete(ctx, key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Delete of a missing key: %v, want ErrNotFound", err)
	}
	put(t, st, target.Record{Key: key, LastSeen: at(0)})
	if err := st.Delete(ctx, key); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := st.Get(ctx, key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	if n, err := st.Expire(ctx, at(3600)); err != nil || n != 0 {
		t.Errorf("Expire after Delete = %d, %v; want 0 (no index entry left)", n, err)
	}
}

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

func listTargets(t *testing.T, open Opener) {
	st := open(t)
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

func listRejectsBadQueries(t *testing.T, open Opener) {
	st := open(t)
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

func expire(t *testing.T, open Opener) {
	st := open(t)
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
		var left []target.Key
		for _, i := range tc.left {
			left = append(left, key(i))
		}
		expireAndList(t, st, tc.cutoff, tc.want, left)
	}
}

// expireAndList runs Expire(cutoff) on st and checks that it removed want
// records and left the targets left, in key order.
func expireAndList(t *testing.T, st store.Store, cutoff time.Time, want int, left []target.Key) {
	t.Helper()
	n, err := st.Expire(context.Background(), cutoff)
	if err != nil || n != want {
		t.Errorf("Expire(%v) = %d, %v; want %d", cutoff, n, err, want)
	}
	got, _ := listAll(t, st, store.Query{}, 0)
	if diff := cmp.Diff(left, got); diff != "" {
		t.Errorf("after Expire(%v) (-want +got):\n%s", cutoff, diff)
	}
}

// expireAcrossHours: Expire is exact whatever the hours of LastSeen and
// cutoff (a store may index by a coarser time): a record seen again in a
// later hour is kept until that time, and records of one hour go one by
// one as the cutoff passes them.
func expireAcrossHours(t *testing.T, open Opener) {
	st := open(t)
	ctx := context.Background()
	key := func(name string) target.Key { return target.Key{Cluster: "c", Namespace: "n", Name: name} }
	seen := map[string]int{"moved": 0, "end-of-hour": 3599, "next-hour": 3600, "mid-hour": 5400, "mid-hour-later": 5401}
	for name, s := range seen {
		put(t, st, target.Record{Key: key(name), LastSeen: at(s)})
	}
	// Seen again two hours later, then again a minute after.
	for _, s := range []int{7200, 7260} {
		if _, err := st.Update(ctx, key("moved"), func(r *target.Record) error { r.LastSeen = at(s); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		cutoff int
		want   int
		left   []string
	}{
		{cutoff: 3598, want: 0, left: []string{"end-of-hour", "mid-hour", "mid-hour-later", "moved", "next-hour"}},
		{cutoff: 3600, want: 1, left: []string{"mid-hour", "mid-hour-later", "moved", "next-hour"}},
		{cutoff: 3601, want: 1, left: []string{"mid-hour", "mid-hour-later", "moved"}},
		{cutoff: 5401, want: 1, left: []string{"mid-hour-later", "moved"}},
		{cutoff: 7200, want: 1, left: []string{"moved"}},
		{cutoff: 7260, want: 0, left: []string{"moved"}},
		{cutoff: 7261, want: 1, left: nil},
	} {
		var left []target.Key
		for _, name := range tc.left {
			left = append(left, key(name))
		}
		expireAndList(t, st, at(tc.cutoff), tc.want, left)
	}
}

// TestFeedCountsTargets: Count is exact at its revision, and the changes
// after it (Created, deletions) keep a count current.
func feedCountsTargets(t *testing.T, open Opener) {
	ctx := context.Background()
	st := open(t)
	k := func(n string) target.Key { return target.Key{Cluster: "eu1", Namespace: "shop", Name: n} }
	for _, n := range []string{"a", "b", "c"} {
		if _, err := st.Update(ctx, k(n), decideFn("d")); err != nil {
			t.Fatal(err)
		}
	}
	n, rev, err := st.Count(ctx)
	if err != nil || n != 3 {
		t.Fatalf("Count = %d, %d, %v; want 3 targets", n, rev, err)
	}
	if latest, err := st.Revision(ctx); err != nil || rev != latest {
		t.Fatalf("Count's revision %d, Revision %d, %v; want the same", rev, latest, err)
	}
	if _, err := st.Update(ctx, k("a"), decideFn("d2")); err != nil { // not a new target
		t.Fatal(err)
	}
	if _, err := st.Update(ctx, k("d"), decideFn("d")); err != nil { // new
		t.Fatal(err)
	}
	if err := st.Delete(ctx, k("b")); err != nil {
		t.Fatal(err)
	}
	cs, err := st.Changes(ctx, rev, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		switch {
		case c.Created:
			n++
		case c.Kind == store.ChangeDeleted:
			n--
		}
	}
	if got, _, _ := st.Count(ctx); n != 3 || got != 3 {
		t.Errorf("count kept from the changes = %d, Count = %d; want 3", n, got)
	}
}

// errAny in a test table accepts any non-nil error.
var errAny = errors.New("any error")

// feedResumes: the feed numbers changes with strictly increasing
// revisions (not necessarily dense), Changes after any of them returns
// exactly the later ones, Revision is the latest, and Follow has seen each
// write's changes, in the same order, when the write returns.
func feedResumes(t *testing.T, open Opener) {
	ctx := context.Background()
	st := open(t)
	var (
		mu       sync.Mutex
		followed []string
	)
	stop := st.Follow(func(cs []store.Change) {
		mu.Lock()
		defer mu.Unlock()
		followed = append(followed, describe(cs)...)
	})
	defer stop()
	if rev, err := st.Revision(ctx); err != nil || rev != 0 {
		t.Fatalf("Revision of a new store = %d, %v; want 0", rev, err)
	}
	if cs, err := st.Changes(ctx, 0, 10); err != nil || len(cs) != 0 {
		t.Fatalf("Changes of a new store = %v, %v; want none", cs, err)
	}
	k := func(n string) target.Key { return target.Key{Cluster: "eu1", Namespace: "shop", Name: n} }
	observe := func(id string) func(*target.Record) error {
		return func(r *target.Record) error {
			r.Events = append(r.Events, target.Event{Kind: target.EventApplied, DecisionID: id, At: at(1)})
			return nil
		}
	}
	both := func(r *target.Record) error { // two changes in one write
		if err := decideFn("d3")(r); err != nil {
			return err
		}
		return observe("d3")(r)
	}
	var want []string
	for _, w := range []struct {
		key  string
		fn   func(*target.Record) error
		want []string
	}{
		{"a", decideFn("d1"), []string{"a Decision created"}},
		{"b", decideFn("d2"), []string{"b Decision created"}},
		{"b", observe("d2"), []string{"b Observation"}},
		{"a", both, []string{"a Decision", "a Observation"}},
		{"b", func(r *target.Record) error { r.LastSeen = at(9); return nil }, nil},
		{"b", nil, []string{"b Deleted"}},
	} {
		var err error
		if w.fn == nil {
			err = st.Delete(ctx, k(w.key))
		} else {
			_, err = st.Update(ctx, k(w.key), w.fn)
		}
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, w.want...)
		mu.Lock()
		got := slices.Clone(followed)
		mu.Unlock()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("followed when the write returned (-want +got):\n%s", diff)
		}
	}
	all, err := st.Changes(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, describe(all)); diff != "" {
		t.Fatalf("Changes(0) (-want +got):\n%s", diff)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Revision <= all[i-1].Revision {
			t.Errorf("revision %d follows %d", all[i].Revision, all[i-1].Revision)
		}
	}
	latest, err := st.Revision(ctx)
	if err != nil || latest != all[len(all)-1].Revision {
		t.Errorf("Revision = %d, %v; want the last change's, %d", latest, err, all[len(all)-1].Revision)
	}
	for i, c := range all {
		for _, limit := range []int{1, 100} {
			got, err := st.Changes(ctx, c.Revision, limit)
			if err != nil {
				t.Fatalf("Changes(%d, %d): %v", c.Revision, limit, err)
			}
			rest := all[i+1:]
			rest = rest[:min(limit, len(rest))]
			if diff := cmp.Diff(revisions(rest), revisions(got)); diff != "" {
				t.Errorf("Changes after change %d, limit %d (-want +got):\n%s", i, limit, diff)
			}
		}
	}
	if _, err := st.Changes(ctx, latest+1, 10); !errors.Is(err, store.ErrOutOfRange) {
		t.Errorf("Changes after a revision beyond the latest: %v, want ErrOutOfRange", err)
	}
}

// describe names each change by its target, its kind and whether it
// created the record.
func describe(cs []store.Change) []string {
	var out []string
	for _, c := range cs {
		d := c.Key.Name + " " + string(c.Kind)
		if c.Created {
			d += " created"
		}
		out = append(out, d)
	}
	return out
}

// revisions lists the revisions of cs.
func revisions(cs []store.Change) []uint64 {
	var out []uint64
	for _, c := range cs {
		out = append(out, c.Revision)
	}
	return out
}

// expectWrites: writes announced with Expect that never come hold other
// writes back at most for the store's batch delay (a write still
// completes, well within its deadline), announced writes that come are
// all stored, and taking off more than was announced is harmless.
func expectWrites(t *testing.T, open Opener) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	st := open(t)
	st.Expect(-2) // none announced
	st.Expect(3)
	if _, err := st.Update(ctx, key, appendReplicas(0)); err != nil {
		t.Fatalf("Update while three writes are announced and none comes: %v", err)
	}
	st.Expect(-3)
	const n = 8
	st.Expect(n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			st.Expect(-1) // its request is read
			if _, err := st.Update(ctx, key, appendReplicas(int32(i+1))); err != nil {
				t.Errorf("announced Update %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	got, err := st.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	CheckEachOnce(t, Replicas(got), n+1)
}

// appendReplicas appends a recommendation of replicas to the record.
func appendReplicas(replicas int32) func(*target.Record) error {
	return func(r *target.Record) error {
		r.History.Recommendations = append(r.History.Recommendations, engine.Recommendation{Replicas: replicas, At: at(int(replicas))})
		r.LastSeen = at(int(replicas))
		return nil
	}
}

// decisionLog: each decision enters its target's log; Decisions pages
// through it oldest first, by From and To, with tokens; another target's
// decisions and an unknown target's (none) stay out; bad queries are
// ErrInvalid; Delete removes the log with the record.
func decisionLog(t *testing.T, open Opener) {
	ctx := context.Background()
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	st := open(t)
	decideAt := func(k target.Key, i int) {
		t.Helper()
		if _, err := st.Decide(ctx, k, func(r *target.Record) error {
			r.Last = &target.LastDecision{ID: fmt.Sprint(k.Name, i), At: at(15 * i)}
			r.Last.Decision.DesiredReplicas = int32(i + 1)
			r.LastSeen = at(15 * i)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		decideAt(key, i)
	}
	decideAt(target.Key{Cluster: "c", Namespace: "n", Name: "web-2"}, 9) // its name extends key's
	read := func(k target.Key, q store.DecisionQuery) (replicas []int32, next string) {
		t.Helper()
		page, next, err := st.Decisions(ctx, k, q)
		if err != nil {
			t.Fatalf("Decisions(%s, %+v): %v", k, q, err)
		}
		for _, d := range page {
			replicas = append(replicas, d.DesiredReplicas)
		}
		return replicas, next
	}
	var pages [][]int32
	q := store.DecisionQuery{PageSize: 2}
	for {
		page, next := read(key, q)
		pages = append(pages, page)
		if next == "" {
			break
		}
		q.PageToken = next
	}
	if diff := cmp.Diff([][]int32{{1, 2}, {3, 4}, {5}}, pages); diff != "" {
		t.Errorf("pages of 2 (-want +got):\n%s", diff)
	}
	if got, next := read(key, store.DecisionQuery{From: at(15), To: at(45)}); !slices.Equal(got, []int32{2, 3}) || next != "" {
		t.Errorf("From 15 s To 45 s: %v, next %q; want [2 3] and no next page", got, next)
	}
	if got, next := read(target.Key{Cluster: "c", Namespace: "n", Name: "none"}, store.DecisionQuery{}); got != nil || next != "" {
		t.Errorf("an unknown target's log: %v, next %q; want none", got, next)
	}
	for _, bad := range []store.DecisionQuery{{PageSize: -1}, {PageToken: "!"}} {
		if _, _, err := st.Decisions(ctx, key, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Decisions(%+v): %v, want ErrInvalid", bad, err)
		}
	}
	if err := st.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if got, _ := read(key, store.DecisionQuery{}); got != nil {
		t.Errorf("the log after Delete: %v, want none", got)
	}
}

// healthyUntilClosed: an open store is healthy; after Close it is not,
// and every call returns ErrClosed.
func healthyUntilClosed(t *testing.T, open Opener) {
	ctx := context.Background()
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	st := open(t)
	Put(t, st, target.Record{Key: key, LastSeen: at(0)})
	if err := st.Healthy(ctx); err != nil {
		t.Fatalf("Healthy of an open store: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := st.Healthy(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Healthy after Close: %v, want ErrClosed", err)
	}
	if _, err := st.Update(ctx, key, appendReplicas(1)); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Update after Close: %v, want ErrClosed", err)
	}
	if _, _, err := st.List(ctx, store.Query{}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("List after Close: %v, want ErrClosed", err)
	}
	if err := st.Close(); !errors.Is(err, store.ErrClosed) {
		t.Errorf("a second Close: %v, want ErrClosed", err)
	}
}

// backup: Backup tells the snapshot's size before writing it, writes
// exactly that many bytes, and returns their number.
func backup(t *testing.T, open Opener) {
	ctx := context.Background()
	st := open(t)
	for i := range 3 {
		Put(t, st, target.Record{Key: target.Key{Cluster: "c", Namespace: "n", Name: fmt.Sprint("web-", i)}, LastSeen: at(i)})
	}
	var buf bytes.Buffer
	announced := int64(-1)
	n, err := st.Backup(ctx, func(size int64) error {
		if buf.Len() != 0 {
			t.Error("size was called after the first write")
		}
		announced = size
		return nil
	}, &buf)
	if err != nil {
		t.Fatalf("Backup: %v", err)
	}
	if n <= 0 || n != int64(buf.Len()) || n != announced {
		t.Errorf("Backup returned %d, wrote %d bytes, announced %d; want all equal and more than 0", n, buf.Len(), announced)
	}
}
