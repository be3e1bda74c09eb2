package boltstore_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
	"github.com/setpointhq/setpoint/store/storetest"
	"github.com/setpointhq/setpoint/target"
)

// writeOldJournal, when set, rewrites testdata/journal-v4.db and its
// journal with this binary's store (only ever wanted from the code the
// files stand for: main at 85095fa, whose journal entries were written by
// hand with protowire).
var writeOldJournal = flag.Bool("write-old-journal", false, "rewrite testdata/journal-v4.db{,.journal}")

// journaledKey is the target that journaledWrites creates.
var journaledKey = target.Key{Cluster: "eu1", Namespace: "shop", Name: "new"}

// journaledWrites are the writes that follow compatWrites and that the
// golden journal holds: a decision (its feed and decision-log entries),
// an update that moves its record to another hour of the last-seen index,
// and a new record.
func journaledWrites(t *testing.T, st store.Store) {
	ctx := context.Background()
	web, api := compatKeys[0], compatKeys[1]
	if _, err := st.Update(ctx, web, func(r *target.Record) error {
		d := r.Last.Decision
		d.Status.DesiredReplicas = 7
		r.Status = d.Status
		r.Last = &target.LastDecision{ID: "d-web-10", At: storetest.At(10), Decision: d, Before: r.Last.Decision.Status, From: 2}
		r.LastSeen = storetest.At(10)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(ctx, api, func(r *target.Record) error {
		r.Events = append(r.Events, target.Event{Kind: target.EventFailed, From: 4, To: 5, At: storetest.At(11), Message: "later"})
		r.LastSeen = storetest.At(11).Add(3 * time.Hour)
		r.Status.Conditions = append(r.Status.Conditions, engine.Condition{Type: engine.AbleToScale, Status: engine.ConditionTrue, Reason: "ReadyForNewScale", LastTransitionTime: storetest.At(11)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	storetest.Put(t, st, storetest.FullRecordV4(journaledKey))
}

// readJournaled is readCompat with the record journaledWrites creates.
func readJournaled(t *testing.T, st store.Store) (compatRead, target.Record, error) {
	r := readCompat(t, st)
	rec, err := st.Get(context.Background(), journaledKey)
	return r, rec, err
}

// TestReplaysJournalOfTheHandWrittenFormat: a store file and the journal
// that today's main left when it crashed (testdata/journal-v4.db and
// .journal: the writes of compatWrites checkpointed, those of
// journaledWrites only journaled, in the format main wrote by hand)
// replay after the upgrade exactly as the same writes made now read:
// records, change feed, decision log; the file is then migrated.
func TestReplaysJournalOfTheHandWrittenFormat(t *testing.T) {
	golden := filepath.Join("testdata", "journal-v4.db")
	if *writeOldJournal {
		path := newPath(t)
		st := open(t, path, boltstore.Options{Now: compatOptions.Now, CheckpointInterval: time.Hour})
		compatWrites(t, st) // its Delete checkpoints every write before it
		journaledWrites(t, st)
		// The copies are what a crash now leaves: the checkpointer waits
		// an hour, so journaledWrites are only in the journal.
		copyFile(t, path, golden)
		copyFile(t, path+boltstore.JournalSuffix, golden+boltstore.JournalSuffix)
	}

	// Without its journal, the file lacks journaledWrites: the journal is
	// what the test replays.
	bare := newPath(t)
	copyFile(t, golden, bare)
	st := open(t, bare, compatOptions)
	if _, _, err := readJournaled(t, st); err == nil {
		t.Fatalf("%s holds %s without its journal: the journal carries nothing to replay", golden, journaledKey)
	}

	old := newPath(t)
	copyFile(t, golden, old)
	copyFile(t, golden+boltstore.JournalSuffix, old+boltstore.JournalSuffix)
	st = open(t, old, compatOptions)
	if v, err := st.SchemaVersion(); err != nil || v != boltstore.SchemaVersion {
		t.Errorf("SchemaVersion() = %d, %v; want %d", v, err, boltstore.SchemaVersion)
	}
	got, gotRec, err := readJournaled(t, st)
	if err != nil {
		t.Fatalf("Get(%s) after the replay: %v", journaledKey, err)
	}

	fresh := open(t, newPath(t), compatOptions)
	compatWrites(t, fresh)
	journaledWrites(t, fresh)
	want, wantRec, err := readJournaled(t, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the old journal replays (-as written now +replayed):\n%s", diff)
	}
	if diff := cmp.Diff(wantRec, gotRec); diff != "" {
		t.Errorf("%s (-as written now +replayed):\n%s", journaledKey, diff)
	}
	if n := len(got.Decisions[0]); n < 2 {
		t.Errorf("%s has %d logged decisions after the replay; want the journaled one too", compatKeys[0], n)
	}
	// A written store's next Open replays nothing twice.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = open(t, old, compatOptions)
	again, _, err := readJournaled(t, st)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, again); diff != "" {
		t.Errorf("reopened after the replay (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(golden + boltstore.JournalSuffix); err != nil {
		t.Fatal(err)
	}
}
