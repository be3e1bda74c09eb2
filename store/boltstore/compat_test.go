package boltstore_test

import (
	"context"
	"flag"
	"io"
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

// writeCompat, when set, rewrites testdata/compat-v4.db with this binary's
// codec (only ever wanted from the codec the file stands for).
var writeCompat = flag.Bool("write-compat", false, "rewrite testdata/compat-v4.db")

// compatKeys are the targets compatWrites leaves: a record whose decision
// status is its status (stored once), one whose status changed since its
// decision (stored twice), and one removed.
var compatKeys = []target.Key{
	{Cluster: "eu1", Namespace: "shop", Name: "web"},
	{Cluster: "eu1", Namespace: "shop", Name: "api"},
	{Cluster: "eu1", Namespace: "shop", Name: "gone"},
}

// compatWrites makes the writes whose file testdata/compat-v4.db holds:
// every kind of record, change-feed entry and decision-log entry.
func compatWrites(t *testing.T, st store.Store) {
	ctx := context.Background()
	for _, k := range compatKeys {
		storetest.Put(t, st, storetest.FullRecordV4(k))
	}
	web, api := compatKeys[0], compatKeys[1]
	decide := func(id string, s int) func(*target.Record) error {
		return func(r *target.Record) error {
			d := r.Last.Decision
			d.Status = r.Status
			d.Status.DesiredReplicas = int32(s)
			r.Status = d.Status
			r.Last = &target.LastDecision{ID: id, At: storetest.At(s), Decision: d, Before: r.Last.Decision.Status, From: int32(s - 1)}
			r.LastSeen = storetest.At(s)
			return nil
		}
	}
	for _, step := range []struct {
		key target.Key
		fn  func(*target.Record) error
	}{
		{web, decide("d-web-2", 2)},
		{api, decide("d-api-3", 3)},
		{api, func(r *target.Record) error {
			r.Status.Conditions = append(r.Status.Conditions, engine.Condition{Type: engine.ScalingLimited, Status: engine.ConditionTrue, Reason: "TooManyReplicas", LastTransitionTime: storetest.At(4)})
			r.Events = append(r.Events, target.Event{Kind: target.EventFailed, From: 3, To: 4, At: storetest.At(4), DecisionID: "d-api-3", Message: "conflict"})
			return nil
		}},
	} {
		if _, err := st.Update(ctx, step.key, step.fn); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Delete(ctx, compatKeys[2]); err != nil {
		t.Fatal(err)
	}
}

// compatRead is everything a store answers about compatWrites' targets.
type compatRead struct {
	Records   []target.Record
	Missing   []bool
	Changes   []store.Change
	Decisions [][]target.LoggedDecision
}

// compatOptions stamp deletions at a fixed time.
var compatOptions = boltstore.Options{Now: func() time.Time { return storetest.At(9) }}

func readCompat(t *testing.T, st store.Store) compatRead {
	ctx := context.Background()
	var r compatRead
	for _, k := range compatKeys {
		rec, err := st.Get(ctx, k)
		r.Records = append(r.Records, rec)
		r.Missing = append(r.Missing, err != nil)
		ds, _, err := st.Decisions(ctx, k, store.DecisionQuery{})
		if err != nil {
			t.Fatal(err)
		}
		r.Decisions = append(r.Decisions, ds)
	}
	cs, err := st.Changes(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	r.Changes = cs
	return r
}

// TestReadsFilesOfTheHandWrittenCodec: a file written by the store before
// its codec was generated (testdata/compat-v4.db, written by main at
// 3326ac3, whose records were encoded by a hand-written protowire encoder)
// reads exactly as the same writes made now read: records, change feed and
// decision log.
func TestReadsFilesOfTheHandWrittenCodec(t *testing.T) {
	golden := filepath.Join("testdata", "compat-v4.db")
	if *writeCompat {
		path := newPath(t)
		st := open(t, path, compatOptions)
		compatWrites(t, st)
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		copyFile(t, path, golden)
	}
	old := newPath(t)
	copyFile(t, golden, old)
	st := open(t, old, compatOptions)
	got := readCompat(t, st)

	fresh := open(t, newPath(t), compatOptions)
	compatWrites(t, fresh)
	want := readCompat(t, fresh)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the old file reads (-as written now +old file):\n%s", diff)
	}
	if len(got.Changes) < 7 || len(got.Decisions[0]) == 0 || !got.Missing[2] || got.Records[0].Last == nil {
		t.Errorf("the file lacks what it should hold: %d changes, %d decisions of %s, %s missing %v", len(got.Changes), len(got.Decisions[0]), compatKeys[0], compatKeys[2], got.Missing[2])
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
