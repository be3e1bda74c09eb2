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
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
)

// key is the key of the target name in cluster "c", namespace "n".
func key(name string) target.Key { return target.Key{Cluster: "c", Namespace: "n", Name: name} }

// must stops the test on a non-nil err.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// seenAt is an Update function that only sets LastSeen to At(s).
func seenAt(s int) func(*target.Record) error {
	return func(r *target.Record) error { r.LastSeen = At(s); return nil }
}

// errAny in a test table accepts any non-nil error.
var errAny = errors.New("any error")

// update: a new target's fn gets a zero record with its key; what fn
// leaves is stored and returned under the key Update was given; nothing is
// stored when fn fails or leaves a value no record can hold.
func update(t *testing.T, open Opener) {
	errBoom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		fn      func(*target.Record) error
		wantErr error          // errAny: any error
		want    *target.Record // nil: nothing stored
	}{
		{"new target starts from a zero record with its key", func(r *target.Record) error {
			if !cmp.Equal(*r, target.Record{Key: key("web")}) {
				return fmt.Errorf("fn got %+v", *r)
			}
			return seenAt(0)(r)
		}, nil, &target.Record{Key: key("web"), LastSeen: At(0)}},
		{"fn error stores nothing", func(r *target.Record) error { r.LastSeen = At(0); return errBoom }, errBoom, nil},
		{"the key fn leaves is ignored", func(r *target.Record) error {
			r.Key = target.Key{Name: "other"}
			return seenAt(0)(r)
		}, nil, &target.Record{Key: key("web"), LastSeen: At(0)}},
		{"a string that is not UTF-8 is refused", func(r *target.Record) error { r.Ref.Name = "\xff"; return nil }, errAny, nil},
		{"a time a timestamp cannot hold is refused", func(r *target.Record) error {
			r.LastSeen = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
			return nil
		}, errAny, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := open(t)
			got, err := st.Update(t.Context(), key("web"), tc.fn)
			if tc.wantErr == errAny && err == nil || tc.wantErr != errAny && !errors.Is(err, tc.wantErr) {
				t.Fatalf("Update: %v, want %v", err, tc.wantErr)
			}
			stored, err := st.Get(t.Context(), key("web"))
			if tc.want == nil {
				if !errors.Is(err, store.ErrNotFound) {
					t.Errorf("Get: %+v, %v; want ErrNotFound", stored, err)
				}
				return
			}
			must(t, err)
			if diff := cmp.Diff(*tc.want, got); diff != "" {
				t.Errorf("Update returned (-want +got):\n%s", diff)
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
	ctx, st := t.Context(), open(t)
	var seen *target.LastDecision // what fn last saw of the previous decision
	decision := func(id string, s int) func(*target.Record) error {
		return func(r *target.Record) error {
			seen = nil
			if r.Last != nil {
				seen = &target.LastDecision{ID: r.Last.ID, At: r.Last.At}
			}
			r.Last = &target.LastDecision{ID: id, At: At(s), From: int32(3 + s)}
			r.LastSeen = At(s)
			return nil
		}
	}
	first, err := st.Decide(ctx, key("web"), decision("d1", 0))
	if err != nil || first.Last == nil || first.Last.ID != "d1" || first.Last.From != 3 || seen != nil {
		t.Fatalf("Decide(new target) = last decision %+v, %v; fn saw %+v; want d1 from 3, and no previous decision", first.Last, err, seen)
	}
	second, err := st.Decide(ctx, key("web"), decision("d2", 15))
	must(t, err)
	if want := (&target.LastDecision{ID: "d1", At: At(0)}); !cmp.Equal(seen, want) {
		t.Errorf("fn saw the previous decision as %+v; want ID and At %+v", seen, want)
	}
	for _, tc := range []struct {
		name string
		fn   func(*target.Record) error
	}{
		{"fn keeps the previous decision", seenAt(30)},
		{"fn fails", func(r *target.Record) error {
			r.Last = &target.LastDecision{ID: "d3", At: At(30)}
			return errors.New("boom")
		}},
	} {
		if _, err := st.Decide(ctx, key("web"), tc.fn); err == nil {
			t.Errorf("%s: Decide returned nil; want an error", tc.name)
		}
		stored, err := st.Get(ctx, key("web"))
		must(t, err)
		if diff := cmp.Diff(second, stored); diff != "" {
			t.Errorf("%s: stored record changed (-before +after):\n%s", tc.name, diff)
		}
	}
}

// deleteTarget: Delete removes a record and its expiry entry, and answers
// ErrNotFound for a key without one.
func deleteTarget(t *testing.T, open Opener) {
	ctx, st := t.Context(), open(t)
	if err := st.Delete(ctx, key("web")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Delete of a missing key: %v, want ErrNotFound", err)
	}
	Put(t, st, target.Record{Key: key("web"), LastSeen: At(0)})
	must(t, st.Delete(ctx, key("web")))
	if _, err := st.Get(ctx, key("web")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	if n, err := st.Expire(ctx, At(3600)); err != nil || n != 0 {
		t.Errorf("Expire after Delete = %d, %v; want 0 (no index entry left)", n, err)
	}
}

// bounds: Update keeps a record's newest DefaultMaxEvents events and, of
// each history list, the DefaultMaxHistory entries latest in time, in
// their order (the engine overwrites entries in place: the oldest may be
// anywhere).
func bounds(t *testing.T, open Opener) {
	const oldest = store.DefaultMaxHistory / 2
	st := open(t)
	got, err := st.Update(t.Context(), key("web"), func(r *target.Record) error {
		for i := range store.DefaultMaxEvents + 1 {
			r.Events = append(r.Events, target.Event{Kind: target.EventApplied, DecisionID: fmt.Sprint(i), At: At(i)})
		}
		for i := range store.DefaultMaxHistory + 1 {
			r.History.Recommendations = append(r.History.Recommendations, engine.Recommendation{Replicas: int32(i), At: At(i)})
		}
		r.History.Recommendations[oldest].At = At(-1)
		return nil
	})
	must(t, err)
	stored, err := st.Get(t.Context(), key("web"))
	must(t, err)
	var wantIDs []string
	for i := 1; i <= store.DefaultMaxEvents; i++ {
		wantIDs = append(wantIDs, fmt.Sprint(i))
	}
	var wantReplicas []int32
	for i := range int32(store.DefaultMaxHistory + 1) {
		if i != oldest {
			wantReplicas = append(wantReplicas, i)
		}
	}
	for _, rec := range []target.Record{got, stored} {
		var ids []string
		for _, e := range rec.Events {
			ids = append(ids, e.DecisionID)
		}
		if diff := cmp.Diff(wantIDs, ids); diff != "" {
			t.Errorf("events kept (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(wantReplicas, Replicas(rec)); diff != "" {
			t.Errorf("recommendations kept (-want +got):\n%s", diff)
		}
	}
}

// readPages returns every page of a paged read, first to last: read gets
// each page's token, "" for the first. what names the read in failures.
func readPages[T any](t testing.TB, what string, read func(token string) ([]T, string, error)) [][]T {
	t.Helper()
	var pages [][]T
	for token := ""; ; {
		page, next, err := read(token)
		if err != nil {
			t.Fatalf("%s, page %d: %v", what, len(pages)+1, err)
		}
		pages = append(pages, page)
		if next == "" {
			return pages
		}
		token = next
	}
}

// listAll lists q in pages of size and returns the keys seen and how many
// pages it took; every page but the last must be full.
func listAll(t testing.TB, st store.Store, q store.Query, size int) (keys []target.Key, pages int) {
	t.Helper()
	q.PageSize = size
	ps := readPages(t, fmt.Sprintf("List(%+v)", q), func(token string) ([]target.Record, string, error) {
		q.PageToken = token
		return st.List(t.Context(), q)
	})
	for i, page := range ps {
		if i < len(ps)-1 && len(page) != size {
			t.Fatalf("List(%+v) returned a short page of %d with a next token", q, len(page))
		}
		for _, r := range page {
			keys = append(keys, r.Key)
		}
	}
	return keys, len(ps)
}

// listTargets: List walks keys in byte order, within a cluster or a
// namespace when asked, in pages of the size asked (the default when 0,
// at most MaxPageSize).
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
		Put(t, st, target.Record{Key: all[i], LastSeen: At(i)})
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

// listRejectsBadQueries: a query List cannot serve is ErrInvalid, with no
// records and no next page.
func listRejectsBadQueries(t *testing.T, open Opener) {
	st := open(t)
	for _, c := range []string{"a", "b", "c"} {
		Put(t, st, target.Record{Key: target.Key{Cluster: c, Namespace: "n", Name: "x"}, LastSeen: At(0)})
	}
	_, tokenOfAll, err := st.List(t.Context(), store.Query{PageSize: 1})
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
			recs, next, err := st.List(t.Context(), tc.q)
			if !errors.Is(err, store.ErrInvalid) || recs != nil || next != "" {
				t.Errorf("List(%+v) = %d records, %q, %v; want ErrInvalid", tc.q, len(recs), next, err)
			}
		})
	}
}

// sighting is an Update that sets the target's LastSeen.
type sighting struct {
	name string
	at   time.Time // zero: a target never seen
}

// expireStep is an Expire(At(cutoff)) that removes removed targets and
// leaves those of left, in key order.
type expireStep struct {
	cutoff, removed int
	left            []string
}

// expireRuns: Expire removes exactly the targets last seen before its
// cutoff, the first run within minutes (with a target never seen), the
// second across hours (a store may index LastSeen by a coarser time, yet
// Expire is exact): a target seen again in a later hour is kept until
// that time, and the targets of one hour go one by one as the cutoff
// passes them.
var expireRuns = map[string]struct {
	seen  []sighting // in order; a target seen again moves
	steps []expireStep
}{
	"Expire": {
		seen: []sighting{{"a", At(0)}, {"b", At(60)}, {"c", At(120)}, {"d", At(180)}, {"e", At(240)}, {"f", time.Time{}}, {"a", At(600)}},
		steps: []expireStep{
			{-1, 1, []string{"a", "b", "c", "d", "e"}}, // only the zero LastSeen
			{120, 1, []string{"a", "c", "d", "e"}},     // the cutoff itself is kept
			{120, 0, []string{"a", "c", "d", "e"}},
			{599, 3, []string{"a"}},
			{601, 1, nil},
		},
	},
	"ExpireAcrossHours": {
		seen: []sighting{
			{"moved", At(0)}, {"end-of-hour", At(3599)}, {"next-hour", At(3600)}, {"mid-hour", At(5400)}, {"mid-hour-later", At(5401)},
			{"moved", At(7200)}, {"moved", At(7260)}, // seen again two hours later, then a minute after
		},
		steps: []expireStep{
			{3598, 0, []string{"end-of-hour", "mid-hour", "mid-hour-later", "moved", "next-hour"}},
			{3600, 1, []string{"mid-hour", "mid-hour-later", "moved", "next-hour"}},
			{3601, 1, []string{"mid-hour", "mid-hour-later", "moved"}},
			{5401, 1, []string{"mid-hour-later", "moved"}},
			{7200, 1, []string{"moved"}},
			{7260, 0, []string{"moved"}},
			{7261, 1, nil},
		},
	},
}

// expire runs expireRuns[name].
func expire(name string) func(*testing.T, Opener) {
	run := expireRuns[name]
	return func(t *testing.T, open Opener) {
		st := open(t)
		for _, s := range run.seen {
			_, err := st.Update(t.Context(), key(s.name), func(r *target.Record) error { r.LastSeen = s.at; return nil })
			must(t, err)
		}
		for _, step := range run.steps {
			n, err := st.Expire(t.Context(), At(step.cutoff))
			if err != nil || n != step.removed {
				t.Errorf("Expire(%v) = %d, %v; want %d", At(step.cutoff), n, err, step.removed)
			}
			var left []target.Key
			for _, name := range step.left {
				left = append(left, key(name))
			}
			got, _ := listAll(t, st, store.Query{}, 0)
			if diff := cmp.Diff(left, got); diff != "" {
				t.Errorf("after Expire(%v) (-want +got):\n%s", At(step.cutoff), diff)
			}
		}
	}
}

// feedCountsTargets: Count is exact at its revision, and the changes
// after it (Created, deletions) keep a count current.
func feedCountsTargets(t *testing.T, open Opener) {
	ctx, st := t.Context(), open(t)
	for _, name := range []string{"a", "b", "c"} {
		_, err := st.Update(ctx, key(name), DecideFn("d"))
		must(t, err)
	}
	n, rev, err := st.Count(ctx)
	if err != nil || n != 3 {
		t.Fatalf("Count = %d, %d, %v; want 3 targets", n, rev, err)
	}
	if latest, err := st.Revision(ctx); err != nil || rev != latest {
		t.Fatalf("Count's revision %d, Revision %d, %v; want the same", rev, latest, err)
	}
	_, err = st.Update(ctx, key("a"), DecideFn("d2")) // not a new target
	must(t, err)
	_, err = st.Decide(ctx, key("d"), DecideFn("d")) // new
	must(t, err)
	must(t, st.Delete(ctx, key("b")))
	cs, err := st.Changes(ctx, rev, 10)
	must(t, err)
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

// feedResumes: Update, Decide, Delete and Expire record their changes;
// the feed numbers them with strictly increasing revisions (not
// necessarily dense), Changes after any of them returns exactly the later
// ones, Revision is the latest, and Follow has seen each write's changes,
// in the same order, when the write returns.
func feedResumes(t *testing.T, open Opener) {
	ctx, st := t.Context(), open(t)
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
	observe := func(id string) func(*target.Record) error {
		return func(r *target.Record) error {
			r.Events = append(r.Events, target.Event{Kind: target.EventApplied, DecisionID: id, At: At(1)})
			return nil
		}
	}
	both := func(r *target.Record) error { // two changes in one write
		return errors.Join(DecideFn("d3")(r), observe("d3")(r))
	}
	update := func(name string, fn func(*target.Record) error) func() error {
		return func() error { _, err := st.Update(ctx, key(name), fn); return err }
	}
	var want []string
	for _, w := range []struct {
		write func() error
		want  []string
	}{
		{update("a", DecideFn("d1")), []string{"a Decision created"}},
		{func() error { _, err := st.Decide(ctx, key("b"), DecideFn("d2")); return err }, []string{"b Decision created"}},
		{update("b", observe("d2")), []string{"b Observation"}},
		{update("a", both), []string{"a Decision", "a Observation"}},
		{update("b", seenAt(9)), nil},
		{func() error { return st.Delete(ctx, key("b")) }, []string{"b Deleted"}},
		{func() error { _, err := st.Expire(ctx, At(1)); return err }, []string{"a Deleted"}},
	} {
		must(t, w.write())
		want = append(want, w.want...)
		mu.Lock()
		got := slices.Clone(followed)
		mu.Unlock()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("followed when the write returned (-want +got):\n%s", diff)
		}
	}
	all, err := st.Changes(ctx, 0, 100)
	must(t, err)
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
			if diff := cmp.Diff(rest, got, cmpopts.EquateEmpty()); diff != "" {
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

// expectWrites: writes announced with Expect that never come do not stop
// another write (it completes well within its 30 s deadline; the bound
// itself, the batch delay, is the backend's to test), announced writes
// that come are all stored, and taking off more than was announced is
// harmless.
func expectWrites(t *testing.T, open Opener) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	st := open(t)
	st.Expect(-2) // none announced
	st.Expect(3)
	if _, err := st.Update(ctx, key("web"), appendReplicas(0)); err != nil {
		t.Fatalf("Update while three writes are announced and none comes: %v", err)
	}
	st.Expect(-3)
	const n = 8
	st.Expect(n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			st.Expect(-1) // it reaches the store
			if _, err := st.Update(ctx, key("web"), appendReplicas(int32(i+1))); err != nil {
				t.Errorf("announced Update %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	got, err := st.Get(ctx, key("web"))
	must(t, err)
	CheckEachOnce(t, Replicas(got), n+1)
}

// appendReplicas appends a recommendation of replicas to the record.
func appendReplicas(replicas int32) func(*target.Record) error {
	return func(r *target.Record) error {
		r.History.Recommendations = append(r.History.Recommendations, engine.Recommendation{Replicas: replicas, At: At(int(replicas))})
		r.LastSeen = At(int(replicas))
		return nil
	}
}

// decisionLog: each decision enters its target's log; Decisions pages
// through it oldest first, by From and To, with tokens; another target's
// decisions and an unknown target's (none) stay out; bad queries are
// ErrInvalid; Delete removes the log with the record.
func decisionLog(t *testing.T, open Opener) {
	ctx, st := t.Context(), open(t)
	decideAt := func(k target.Key, i int) {
		t.Helper()
		_, err := st.Decide(ctx, k, func(r *target.Record) error {
			r.Last = &target.LastDecision{ID: fmt.Sprint(k.Name, i), At: At(15 * i)}
			r.Last.Decision.DesiredReplicas = int32(i + 1)
			r.LastSeen = At(15 * i)
			return nil
		})
		must(t, err)
	}
	for i := range 5 {
		decideAt(key("web"), i)
	}
	decideAt(key("web-2"), 9) // its name extends web's
	// pages reads k's whole log and returns each page's desired replicas.
	pages := func(k target.Key, q store.DecisionQuery) [][]int32 {
		t.Helper()
		var out [][]int32
		for _, page := range readPages(t, fmt.Sprintf("Decisions(%s, %+v)", k, q), func(token string) ([]target.LoggedDecision, string, error) {
			q.PageToken = token
			return st.Decisions(ctx, k, q)
		}) {
			var replicas []int32
			for _, d := range page {
				replicas = append(replicas, d.DesiredReplicas)
			}
			out = append(out, replicas)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		key  target.Key
		q    store.DecisionQuery
		want [][]int32
	}{
		{"pages of 2", key("web"), store.DecisionQuery{PageSize: 2}, [][]int32{{1, 2}, {3, 4}, {5}}},
		{"From 15 s To 45 s", key("web"), store.DecisionQuery{From: At(15), To: At(45)}, [][]int32{{2, 3}}},
		{"an unknown target", key("none"), store.DecisionQuery{}, [][]int32{nil}},
	} {
		if diff := cmp.Diff(tc.want, pages(tc.key, tc.q)); diff != "" {
			t.Errorf("%s: pages of desired replicas (-want +got):\n%s", tc.name, diff)
		}
	}
	for _, bad := range []store.DecisionQuery{{PageSize: -1}, {PageToken: "!"}} {
		if _, _, err := st.Decisions(ctx, key("web"), bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Decisions(%+v): %v, want ErrInvalid", bad, err)
		}
	}
	must(t, st.Delete(ctx, key("web")))
	if diff := cmp.Diff([][]int32{nil}, pages(key("web"), store.DecisionQuery{})); diff != "" {
		t.Errorf("the log after Delete (-want +got):\n%s", diff)
	}
}

// healthyUntilClosed: an open store is healthy; after Close it is not,
// and every call returns ErrClosed.
func healthyUntilClosed(t *testing.T, open Opener) {
	ctx, st := t.Context(), open(t)
	Put(t, st, target.Record{Key: key("web"), LastSeen: At(0)})
	if err := st.Healthy(ctx); err != nil {
		t.Fatalf("Healthy of an open store: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"Healthy", func() error { return st.Healthy(ctx) }},
		{"Update", func() error { _, err := st.Update(ctx, key("web"), appendReplicas(1)); return err }},
		{"List", func() error { _, _, err := st.List(ctx, store.Query{}); return err }},
		{"a second Close", st.Close},
	} {
		if err := c.call(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", c.name, err)
		}
	}
}

// backup: Backup tells the snapshot's size before writing it, writes
// exactly that many bytes, and returns their number.
func backup(t *testing.T, open Opener) {
	st := open(t)
	for i := range 3 {
		Put(t, st, target.Record{Key: key(fmt.Sprint("web-", i)), LastSeen: At(i)})
	}
	var buf bytes.Buffer
	announced := int64(-1)
	n, err := st.Backup(t.Context(), func(size int64) error {
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
