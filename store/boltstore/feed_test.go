package boltstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
	"github.com/setpointhq/setpoint/store/storetest"
	"github.com/setpointhq/setpoint/target"
)

// decideFn is storetest.DecideFn.
var decideFn = storetest.DecideFn

// observeFn appends an applied event for id, as Observe does.
func observeFn(id string) func(*target.Record) error {
	return func(rec *target.Record) error {
		rec.Events = append(rec.Events, target.Event{Kind: target.EventApplied, From: 1, To: 2, At: at(1), DecisionID: id})
		rec.LastSeen = at(1)
		return nil
	}
}

// summary is what a test compares of a change.
type summary struct {
	Rev  uint64
	Name string
	Kind store.ChangeKind
	ID   string // decision id, or the event's decision id
}

func summarize(cs []store.Change) []summary {
	var out []summary
	for _, c := range cs {
		s := summary{Rev: c.Revision, Name: c.Key.Name, Kind: c.Kind}
		switch c.Kind {
		case store.ChangeDecision:
			s.ID = c.Decision.ID
		case store.ChangeObservation:
			s.ID = c.Event.DecisionID
		}
		out = append(out, s)
	}
	return out
}

func TestFeedRecordsEveryChange(t *testing.T) {
	ctx := context.Background()
	path := newPath(t)
	st := open(t, path, boltstore.Options{Now: func() time.Time { return at(99) }})
	var (
		mu       sync.Mutex
		followed []store.Change
	)
	stop := st.Follow(func(cs []store.Change) {
		mu.Lock()
		followed = append(followed, cs...)
		mu.Unlock()
	})
	web, api := target.Key{Cluster: "eu1", Namespace: "shop", Name: "web"}, target.Key{Cluster: "eu1", Namespace: "shop", Name: "api"}

	must := func(_ target.Record, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.Update(ctx, web, decideFn("d1")))
	must(st.Update(ctx, web, observeFn("d1")))
	must(st.Update(ctx, web, func(rec *target.Record) error { rec.LastSeen = at(2); return nil })) // changes nothing recorded
	if _, err := st.Update(ctx, api, func(*target.Record) error { return errors.New("refused") }); err == nil {
		t.Fatal("failing update succeeded")
	}
	must(st.Update(ctx, api, decideFn("d2")))
	if err := st.Delete(ctx, web); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Expire(ctx, at(100)); err != nil || n != 1 {
		t.Fatalf("Expire = %d, %v", n, err)
	}
	want := []summary{
		{1, "web", store.ChangeDecision, "d1"},
		{2, "web", store.ChangeObservation, "d1"},
		{3, "api", store.ChangeDecision, "d2"},
		{4, "web", store.ChangeDeleted, ""},
		{5, "api", store.ChangeDeleted, ""},
	}
	got, err := st.Changes(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, summarize(got)); d != "" {
		t.Errorf("Changes (-want +got):\n%s", d)
	}
	if !got[3].At.Equal(at(99)) {
		t.Errorf("deletion at %v, want the store clock's %v", got[3].At, at(99))
	}
	stop()
	mu.Lock()
	if d := cmp.Diff(want, summarize(followed)); d != "" {
		t.Errorf("followed (-want +got):\n%s", d)
	}
	mu.Unlock()
	// After stop, nothing more is followed.
	must(st.Update(ctx, api, decideFn("d3")))
	mu.Lock()
	if len(followed) != len(want) {
		t.Errorf("followed %d changes after stop", len(followed)-len(want))
	}
	mu.Unlock()

	// Pages, the latest revision, and revisions kept across a reopen.
	page, err := st.Changes(ctx, 2, 2)
	if err != nil || len(page) != 2 || page[0].Revision != 3 {
		t.Errorf("Changes(2, 2) = %v, %v", summarize(page), err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = open(t, path, boltstore.Options{})
	if rev, err := st.Revision(ctx); err != nil || rev != 6 {
		t.Fatalf("Revision after reopen = %d, %v; want 6", rev, err)
	}
	must(st.Update(ctx, web, decideFn("d4")))
	if cs, err := st.Changes(ctx, 6, 10); err != nil || len(cs) != 1 || cs[0].Revision != 7 || cs[0].Decision.ID != "d4" {
		t.Errorf("after reopen: %v, %v; want revision 7 for d4", summarize(cs), err)
	}
	if _, err := st.Changes(ctx, 8, 10); !errors.Is(err, store.ErrOutOfRange) {
		t.Errorf("Changes beyond the latest: %v, want ErrOutOfRange", err)
	}
	if cs, err := st.Changes(ctx, 7, 10); err != nil || len(cs) != 0 {
		t.Errorf("Changes at the latest = %v, %v; want none", cs, err)
	}
}

func TestFeedKeepsMaxChanges(t *testing.T) {
	ctx := context.Background()
	st := open(t, newPath(t), boltstore.Options{MaxChanges: 3})
	k := target.Key{Cluster: "eu1", Namespace: "shop", Name: "web"}
	for i := range 5 {
		if _, err := st.Update(ctx, k, decideFn(string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	// Revisions 3, 4 and 5 are kept: resuming after 2 works, after 1 not.
	if cs, err := st.Changes(ctx, 2, 10); err != nil || len(cs) != 3 || cs[0].Revision != 3 {
		t.Errorf("Changes(2) = %v, %v; want revisions 3..5", summarize(cs), err)
	}
	if _, err := st.Changes(ctx, 1, 10); !errors.Is(err, store.ErrOutOfRange) {
		t.Errorf("Changes(1) = %v, want ErrOutOfRange", err)
	}
	if _, err := st.Changes(ctx, 0, 10); !errors.Is(err, store.ErrOutOfRange) {
		t.Errorf("Changes(0) = %v, want ErrOutOfRange", err)
	}
}

// TestFeedConcurrentWritesAreOrdered: under concurrent writes sharing
// commits, followers see every revision once, in order, without gaps.
func TestFeedConcurrentWritesAreOrdered(t *testing.T) {
	ctx := context.Background()
	// The writers announce their writes (Store.Expect, as the server does
	// for the calls it is still reading) and take each back just before
	// making it: the committer holds a batch while writes are announced,
	// and commits it once it holds one write of each writer (MaxBatch).
	// So the writers share commits whatever the scheduling, and the
	// ordering across a shared commit is tested. Unannounced, a write is
	// held only by a busy store, and with one processor the committer may
	// take each write alone: the store is never busy.
	const writers, each = 8, 25
	st := open(t, newPath(t), boltstore.Options{MaxBatch: writers, MaxBatchDelay: 50 * time.Millisecond})
	var (
		mu   sync.Mutex
		revs []uint64
	)
	defer st.Follow(func(cs []store.Change) {
		mu.Lock()
		for _, c := range cs {
			revs = append(revs, c.Revision)
		}
		mu.Unlock()
	})()
	var wg sync.WaitGroup
	st.Expect(writers * each)
	for w := range writers {
		wg.Go(func() {
			k := target.Key{Cluster: "eu1", Namespace: "shop", Name: string(rune('a' + w))}
			for i := range each {
				st.Expect(-1)
				if _, err := st.Update(ctx, k, decideFn(string(rune('a'+i)))); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(revs) != writers*each {
		t.Fatalf("followed %d changes, want %d", len(revs), writers*each)
	}
	for i, r := range revs {
		if r != uint64(i+1) {
			t.Fatalf("change %d has revision %d", i, r)
		}
	}
	if c := st.Stats().Commits; c >= writers*each {
		t.Errorf("%d commits for %d writes: none was shared, so the ordering across a shared commit went untested", c, writers*each)
	}
}

// TestFeedDecisionIsTheRecordsDecision: a decision's entry in the feed, as
// followed live and as read back by Changes, is the record's last decision
// without its history and the status it started from (Change.Decision),
// whether the decision's status is the record's or not.
func TestFeedDecisionIsTheRecordsDecision(t *testing.T) {
	for _, tc := range []struct {
		name string
		// edit changes the record after the decision is made.
		edit func(*target.Record)
	}{
		{name: "status is the record's", edit: func(*target.Record) {}},
		{name: "status differs", edit: func(r *target.Record) { r.Status.DesiredReplicas = 7 }},
		{name: "no status", edit: func(r *target.Record) { r.Last.Decision.Status = engine.Status{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := open(t, newPath(t), boltstore.Options{})
			var followed []store.Change
			stop := st.Follow(func(cs []store.Change) { followed = append(followed, cs...) })
			defer stop()
			key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
			full := fullRecord(key)
			full.Events = nil
			tc.edit(&full)
			stored, err := st.Update(ctx, key, func(r *target.Record) error { *r = full; return nil })
			if err != nil {
				t.Fatal(err)
			}
			want := *stored.Last
			want.Before, want.Decision.History = engine.Status{}, engine.History{}
			read, err := st.Changes(ctx, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			for _, got := range [][]store.Change{followed, read} {
				if len(got) != 1 || got[0].Kind != store.ChangeDecision {
					t.Fatalf("changes %v, want one decision", summarize(got))
				}
				if d := cmp.Diff(&want, got[0].Decision, cmpopts.EquateEmpty()); d != "" {
					t.Errorf("the feed's decision (-want +got):\n%s", d)
				}
			}
		})
	}
}
