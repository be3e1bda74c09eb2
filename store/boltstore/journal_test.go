package boltstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
	"github.com/setpointhq/setpoint/target"
)

// decideNamed is decision id made at second s, as target.Decide leaves a
// record: a new last decision, one more replica.
func decideNamed(id string, s int) func(*target.Record) error {
	return func(rec *target.Record) error {
		rec.Last = &target.LastDecision{ID: id, At: at(s)}
		rec.Status.DesiredReplicas++
		rec.LastSeen = at(s)
		return nil
	}
}

// holdCheckpoints keeps st's checkpointer from writing to bbolt until
// release is called (at the latest at cleanup): journaled writes then stay
// in the journal alone.
func holdCheckpoints(t *testing.T, st *boltstore.Store) (release func()) {
	t.Helper()
	held := make(chan struct{})
	boltstore.SetCheckpointHook(st, func() error { <-held; return nil })
	done := false
	release = func() {
		if !done {
			done = true
			close(held)
		}
	}
	t.Cleanup(release)
	return release
}

// crashCopy copies the store file at path and its journal (both segments)
// into a fresh directory, as a crash would leave them, and returns the
// copy's path.
// tear cuts that many bytes off the journal's end (a frame half written).
func crashCopy(t *testing.T, path string, tear int) string {
	t.Helper()
	dst := newPath(t)
	for _, suffix := range []string{"", boltstore.JournalSuffix, boltstore.OldJournalSuffix} {
		data, err := os.ReadFile(path + suffix)
		if suffix == boltstore.OldJournalSuffix && errors.Is(err, os.ErrNotExist) {
			continue // no old segment
		}
		if err != nil {
			t.Fatal(err)
		}
		if suffix == boltstore.JournalSuffix {
			data = data[:len(data)-tear]
		}
		if err := os.WriteFile(dst+suffix, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestJournalReplaysAcknowledgedWrites: every Update answered is in the
// journal before bbolt has it, and the next Open replays it — records,
// decision log and change feed alike — up to the last intact frame, with
// either way of syncing the journal.
func TestJournalReplaysAcknowledgedWrites(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts boltstore.Options
	}{
		{"default options", boltstore.Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			path := newPath(t)
			st, err := boltstore.Open(path, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			release := holdCheckpoints(t, st)
			keys := []target.Key{{Cluster: "c", Namespace: "n", Name: "a"}, {Cluster: "c", Namespace: "n", Name: "b"}}
			// One caller: one Update per frame, so tearing the journal's
			// end loses exactly the last one.
			for i := range 3 {
				for _, k := range keys {
					if _, err := st.Decide(ctx, k, decideNamed(fmt.Sprintf("%s-%d", k.Name, i), i*15)); err != nil {
						t.Fatal(err)
					}
				}
			}
			beforeLast, err := st.Get(ctx, keys[0])
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Update(ctx, keys[0], observeFn("a-2")); err != nil {
				t.Fatal(err)
			}
			want := map[target.Key]target.Record{}
			for _, k := range keys {
				if want[k], err = st.Get(ctx, k); err != nil { // from the journal's overlay
					t.Fatal(err)
				}
			}
			whole, torn := crashCopy(t, path, 0), crashCopy(t, path, 3)
			release()
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path + boltstore.JournalSuffix); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("after Close the journal is still there (%v): one file is the store", err)
			}

			for _, c := range []struct {
				name      string
				path      string
				changes   int
				lastEvent bool
			}{
				{"whole journal", whole, 7, true},
				{"last frame torn", torn, 6, false},
			} {
				got := open(t, c.path, tc.opts)
				for i, k := range keys {
					rec, err := got.Get(ctx, k)
					if err != nil {
						t.Fatalf("%s: Get %s: %v", c.name, k, err)
					}
					w := want[k]
					if i == 0 && !c.lastEvent {
						w = beforeLast
					}
					if diff := cmp.Diff(w, rec); diff != "" {
						t.Errorf("%s: %s replayed (-want +got):\n%s", c.name, k, diff)
					}
					log, _, err := got.Decisions(ctx, k, store.DecisionQuery{})
					if err != nil || len(log) != 3 {
						t.Errorf("%s: decision log of %s: %d entries, %v; want 3", c.name, k, len(log), err)
					}
				}
				changes, err := got.Changes(ctx, 0, 100)
				if err != nil {
					t.Fatal(err)
				}
				if len(changes) != c.changes {
					t.Errorf("%s: %d changes in the feed, want %d", c.name, len(changes), c.changes)
				}
				for i, ch := range changes {
					if ch.Revision != uint64(i+1) {
						t.Errorf("%s: change %d has revision %d, want %d", c.name, i, ch.Revision, i+1)
					}
				}
				if fi, err := os.Stat(c.path + boltstore.JournalSuffix); err != nil || fi.Size() != 0 {
					t.Errorf("%s: journal after replay: %v, %v; want empty", c.name, fi, err)
				}
				// The next write continues the feed's numbering.
				if _, err := got.Update(ctx, keys[1], observeFn("b-2")); err != nil {
					t.Fatal(err)
				}
				if rev, err := got.Revision(ctx); err != nil || rev != uint64(c.changes+1) {
					t.Errorf("%s: revision after one more write %d, %v; want %d", c.name, rev, err, c.changes+1)
				}
			}
		})
	}
}

// TestReadsSeeJournaledWrites: a write answered is seen at once by Get
// (from the overlay) and by every read that walks bbolt, which waits for
// the checkpointer to catch up rather than answer without it.
func TestReadsSeeJournaledWrites(t *testing.T) {
	ctx := context.Background()
	st := open(t, newPath(t), boltstore.Options{})
	release := holdCheckpoints(t, st)
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	if _, err := st.Decide(ctx, key, decideNamed("d1", 0)); err != nil {
		t.Fatal(err)
	}
	if rec, err := st.Get(ctx, key); err != nil || rec.Last == nil || rec.Last.ID != "d1" {
		t.Fatalf("Get while the checkpointer is held: %+v, %v; want decision d1", rec.Last, err)
	}
	reads := map[string]func(ctx context.Context) (int, error){
		"List": func(ctx context.Context) (int, error) {
			recs, _, err := st.List(ctx, store.Query{})
			return len(recs), err
		},
		"Count": func(ctx context.Context) (int, error) {
			n, _, err := st.Count(ctx)
			return n, err
		},
		"Changes": func(ctx context.Context) (int, error) {
			cs, err := st.Changes(ctx, 0, 10)
			return len(cs), err
		},
		"Decisions": func(ctx context.Context) (int, error) {
			log, _, err := st.Decisions(ctx, key, store.DecisionQuery{})
			return len(log), err
		},
	}
	for name, read := range reads {
		short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		n, err := read(short)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s while the checkpointer is held: %d, %v; want it to wait (DeadlineExceeded), not to miss the write", name, n, err)
		}
	}
	release()
	for name, read := range reads {
		if n, err := read(ctx); err != nil || n != 1 {
			t.Errorf("%s: %d, %v; want 1", name, n, err)
		}
	}
}

// TestDeleteFollowsJournaledWrites: Delete and Expire write bbolt
// directly, after the journaled writes before them: the feed keeps their
// order and nothing comes back on reopening.
func TestDeleteFollowsJournaledWrites(t *testing.T) {
	ctx := context.Background()
	path := newPath(t)
	st := open(t, path, boltstore.Options{})
	a, b := target.Key{Cluster: "c", Namespace: "n", Name: "a"}, target.Key{Cluster: "c", Namespace: "n", Name: "b"}
	for _, k := range []target.Key{a, b} {
		if _, err := st.Decide(ctx, k, decideNamed("d-"+k.Name, 0)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Expire(ctx, at(1)); err != nil || n != 1 {
		t.Fatalf("Expire: %d, %v; want 1 (b)", n, err)
	}
	if _, err := st.Update(ctx, a, observeFn("x")); err != nil {
		t.Fatal(err)
	}
	cs, err := st.Changes(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []summary{{1, "a", store.ChangeDecision, "d-a"}, {2, "b", store.ChangeDecision, "d-b"}, {3, "a", store.ChangeDeleted, ""}, {4, "b", store.ChangeDeleted, ""}}
	if diff := cmp.Diff(want, summarize(cs)[:min(4, len(cs))]); diff != "" {
		t.Errorf("feed (-want +got):\n%s", diff)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = open(t, path, boltstore.Options{})
	if _, err := st.Get(ctx, b); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("expired target after reopening: %v, want ErrNotFound", err)
	}
	if rec, err := st.Get(ctx, a); err != nil || rec.Last != nil {
		t.Errorf("target re-created after its deletion: %+v, %v; want a record without the deleted decision", rec.Last, err)
	}
}

// TestCheckpointFailureKeepsTheJournal: when bbolt refuses a checkpoint
// the store stops taking writes, keeps serving what it has, and the
// journal, kept at Close, gives the answered writes back on reopening.
func TestCheckpointFailureKeepsTheJournal(t *testing.T) {
	ctx := context.Background()
	path := newPath(t)
	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	broken := errors.New("disk full")
	boltstore.SetCheckpointHook(st, func() error { return broken })
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	if _, err := st.Decide(ctx, key, decideNamed("d1", 0)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.List(ctx, store.Query{}); !errors.Is(err, broken) {
		t.Errorf("List after a failed checkpoint: %v, want the checkpoint's error", err)
	}
	if _, err := st.Update(ctx, key, observeFn("d1")); !errors.Is(err, broken) {
		t.Errorf("Update after a failed checkpoint: %v, want the checkpoint's error", err)
	}
	if rec, err := st.Get(ctx, key); err != nil || rec.Last == nil || rec.Last.ID != "d1" {
		t.Errorf("Get after a failed checkpoint: %+v, %v; want decision d1", rec.Last, err)
	}
	if err := st.Close(); !errors.Is(err, broken) {
		t.Errorf("Close: %v, want the checkpoint's error", err)
	}
	st = open(t, path, boltstore.Options{})
	if rec, err := st.Get(ctx, key); err != nil || rec.Last == nil || rec.Last.ID != "d1" {
		t.Errorf("after reopening: %+v, %v; want decision d1 from the journal", rec.Last, err)
	}
}

// TestJournalRotatesPastItsLimit: past its size limit the journal starts
// a new segment without waiting for the checkpointer; the old segment
// stays until its frames are in bbolt, a crash meanwhile replays both, and
// writes go on numbering. A rotation that finds the old segment still
// needed waits for the checkpointer.
func TestJournalRotatesPastItsLimit(t *testing.T) {
	ctx := context.Background()
	path := newPath(t)
	st := open(t, path, boltstore.Options{JournalSegmentBytes: 1}) // every frame passes it
	release := holdCheckpoints(t, st)
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	decide := func(i int) {
		t.Helper()
		if _, err := st.Decide(ctx, key, decideNamed(fmt.Sprint(i), i*15)); err != nil {
			t.Fatal(err)
		}
	}
	size := func(suffix string) int64 {
		fi, err := os.Stat(path + suffix)
		if errors.Is(err, os.ErrNotExist) {
			return -1
		}
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	// Checkpoints held: the first frame moves to the old segment, the
	// second goes to the new one.
	decide(0)
	decide(1)
	if old, cur := size(boltstore.OldJournalSuffix), size(boltstore.JournalSuffix); old <= 0 || cur <= 0 {
		t.Fatalf("segments after two writes with checkpoints held: old %d bytes, current %d; want both written", old, cur)
	}
	crashed := crashCopy(t, path, 0)
	// The second write's rotation waits: the old segment is not applied.
	third := make(chan error, 1)
	go func() {
		_, err := st.Decide(ctx, key, decideNamed("2", 30))
		third <- err
	}()
	select {
	case err := <-third:
		t.Fatalf("a write went through while the old segment was needed and checkpoints held (%v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	release()
	if err := <-third; err != nil {
		t.Fatal(err)
	}
	for i := 3; i < 6; i++ {
		decide(i)
	}
	if cs, err := st.Changes(ctx, 0, 10); err != nil || len(cs) != 6 || cs[5].Revision != 6 {
		t.Errorf("feed: %v, %v; want revisions 1 to 6", summarize(cs), err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if old, cur := size(boltstore.OldJournalSuffix), size(boltstore.JournalSuffix); old != -1 || cur != -1 {
		t.Errorf("after Close: old segment %d bytes, current %d; want both removed", old, cur)
	}

	got := open(t, crashed, boltstore.Options{})
	if log, _, err := got.Decisions(ctx, key, store.DecisionQuery{}); err != nil || len(log) != 2 {
		t.Errorf("after a crash with two segments: %d decisions logged, %v; want 2", len(log), err)
	}
	if rec, err := got.Get(ctx, key); err != nil || rec.Last == nil || rec.Last.ID != "1" {
		t.Errorf("after a crash with two segments: last decision %+v, %v; want the second", rec.Last, err)
	}
	if _, err := os.Stat(crashed + boltstore.OldJournalSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after replay the old segment is still there (%v)", err)
	}
}

// TestJournalPath: the journal sits next to the store's file.
func TestJournalPath(t *testing.T) {
	path := newPath(t)
	open(t, path, boltstore.Options{})
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), filepath.Base(path)+boltstore.JournalSuffix)); err != nil {
		t.Errorf("open store has no journal next to its file: %v", err)
	}
}

// TestJournalReplaysOnlyOntoItsFile: a journal put next to another store's
// file (a restore that kept the wrong journal) is not replayed there, even
// where the sequence numbers would fit.
func TestJournalReplaysOnlyOntoItsFile(t *testing.T) {
	ctx := context.Background()
	path := newPath(t)
	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	release := holdCheckpoints(t, st)
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	if _, err := st.Decide(ctx, key, decideNamed("d1", 0)); err != nil {
		t.Fatal(err)
	}
	journal, err := os.ReadFile(path + boltstore.JournalSuffix)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// Another store, as fresh as the first was: its next frame would be 1.
	other := newPath(t)
	if err := open(t, other, boltstore.Options{}).Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other+boltstore.JournalSuffix, journal, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := open(t, other, boltstore.Options{}).Get(ctx, key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get on the other store: %v, want ErrNotFound (the journal is not its own)", err)
	}
}
