package boltstore_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
	"github.com/setpointhq/setpoint/store/boltstore/schema"
	"github.com/setpointhq/setpoint/store/storetest"
	"github.com/setpointhq/setpoint/target"
	bolt "go.etcd.io/bbolt"
)

// writeCompat, when set, writes testdata/compat-v<N>.db, N being this
// binary's schema version (only ever wanted once, from the binary whose
// format the file stands for).
var writeCompat = flag.Bool("write-compat", false, "write testdata/compat-v<schema version>.db")

// compatKeys are the targets compatWrites leaves: a record whose decision
// status is its status (stored once), one whose status changed since its
// decision (stored twice), and one removed.
var compatKeys = []target.Key{
	{Cluster: "eu1", Namespace: "shop", Name: "web"},
	{Cluster: "eu1", Namespace: "shop", Name: "api"},
	{Cluster: "eu1", Namespace: "shop", Name: "gone"},
}

// compatWrites makes the writes whose files testdata/compat-v*.db hold:
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

// TestReadsFilesOfEarlierVersions: a file written by an earlier version of
// the store reads exactly as the same writes made now read: records,
// change feed and decision log. compat-v4.db was written by main at
// 3326ac3, whose records were encoded by a hand-written protowire encoder;
// compat-v5.db by main at a9c9780, whose values were compressed with the
// first dictionary (values.dict).
func TestReadsFilesOfEarlierVersions(t *testing.T) {
	if *writeCompat {
		path := newPath(t)
		st := open(t, path, compatOptions)
		compatWrites(t, st)
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		copyFile(t, path, filepath.Join("testdata", fmt.Sprintf("compat-v%d.db", schema.Version)))
	}
	fresh := open(t, newPath(t), compatOptions)
	compatWrites(t, fresh)
	want := readCompat(t, fresh)
	for _, name := range []string{"compat-v4.db", "compat-v5.db"} {
		t.Run(name, func(t *testing.T) {
			old := newPath(t)
			copyFile(t, filepath.Join("testdata", name), old)
			if n := valuesStartingWith(t, old, 0x01); n == 0 {
				t.Errorf("no record value of the file is compressed with the first dictionary (first byte 0x01)")
			}
			st := open(t, old, compatOptions)
			got := readCompat(t, st)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the old file reads (-as written now +old file):\n%s", diff)
			}
			if len(got.Changes) < 7 || len(got.Decisions[0]) == 0 || !got.Missing[2] || got.Records[0].Last == nil {
				t.Errorf("the file lacks what it should hold: %d changes, %d decisions of %s, %s missing %v", len(got.Changes), len(got.Decisions[0]), compatKeys[0], compatKeys[2], got.Missing[2])
			}
		})
	}
}

// valuesStartingWith counts the record values of the file at path whose
// first byte is b (editFile, changing nothing).
func valuesStartingWith(t *testing.T, path string, b byte) int {
	t.Helper()
	n := 0
	editFile(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket(boltstore.BucketRecords).ForEach(func(_, v []byte) error {
			if len(v) > 0 && v[0] == b {
				n++
			}
			return nil
		})
	})
	return n
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
