package record

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
)

// sameDecisionEntry checks that the change-feed entry of rec's last
// decision that EncodeWrite marshals from the record's message decodes to
// what EncodeChange, which converts the decision on its own, gives; created
// is the entry's Created. rec must encode.
func sameDecisionEntry(rec target.Record, created bool) error {
	entries, err := Apply(rec.Key, &target.Record{}, !created, Limits{MaxEvents: 1 << 20, MaxHistory: 1 << 20}, func(r *target.Record) error {
		*r = rec
		return nil
	})
	if err != nil {
		return err
	}
	if len(entries) == 0 || entries[0].Decision == nil || entries[0].Created != created {
		return fmt.Errorf("no decision entry for %+v", rec.Last)
	}
	_, vals, err := EncodeWrite(&rec, entries[:1], Compress)
	if err != nil {
		return err
	}
	alone, err := EncodeChange(&entries[0])
	if err != nil {
		return err
	}
	got, err := DecodeChange(0, vals[0])
	if err != nil {
		return fmt.Errorf("the entry made with the record does not decode: %w", err)
	}
	want, err := DecodeChange(0, alone)
	if err != nil {
		return err
	}
	if diff := cmp.Diff(want, got); diff != "" {
		return fmt.Errorf("entry made with the record (-alone +with the record):\n%s", diff)
	}
	return nil
}

// TestDecisionEntryOfRecord: a decision's change-feed entry marshalled
// from the record's message is the entry EncodeChange makes.
func TestDecisionEntryOfRecord(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*target.Record)
	}{
		{"decision status is the record's", func(*target.Record) {}},
		{"status changed since", func(r *target.Record) { r.Status.DesiredReplicas++ }},
		{"empty key parts", func(r *target.Record) { r.Key = target.Key{Name: "only"} }},
		{"empty key", func(r *target.Record) { r.Key = target.Key{} }},
		{"bare decision", func(r *target.Record) {
			r.Status = engine.Status{}
			r.Last = &target.LastDecision{ID: "d"}
		}},
		{"no id and no time", func(r *target.Record) { r.Last.ID, r.Last.At = "", time.Time{} }},
		{"a long explanation", func(r *target.Record) {
			for range 50 {
				r.Last.Decision.Explanation.Steps = append(r.Last.Decision.Explanation.Steps, engine.Step{Kind: engine.StepLimited, Message: "limited by a policy of a long name"})
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, _ := statusRecord()
			tc.edit(&rec)
			for _, created := range []bool{false, true} {
				if err := sameDecisionEntry(rec, created); err != nil {
					t.Error(err)
				}
			}
		})
	}
	t.Run("a key that is not UTF-8", func(t *testing.T) {
		rec, _ := statusRecord()
		e := store.Change{Key: target.Key{Name: "\xff"}, Kind: store.ChangeDecision, Decision: rec.Last}
		if _, _, err := EncodeWrite(&rec, []store.Change{e}, Compress); err == nil {
			t.Error("an entry of a key that is not UTF-8 was encoded")
		}
	})
}

// TestEntryKinds: each kind of entry reads back as written; bytes that
// are not an entry fail.
func TestEntryKinds(t *testing.T) {
	rec, _ := statusRecord()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, e := range []store.Change{
		{Revision: 7, Key: rec.Key, Kind: store.ChangeObservation, Event: &target.Event{Kind: target.EventApplied, From: 1, To: 2, At: at, DecisionID: "d1"}, Created: true},
		{Revision: 8, Key: rec.Key, Kind: store.ChangeDeleted, At: at},
	} {
		b, err := EncodeChange(&e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeChange(e.Revision, b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(e, got); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
	// A deletion without a time reads back at the Unix epoch, as it did
	// when protobuf-go marshalled entries.
	if b, err := EncodeChange(&store.Change{Key: rec.Key, Kind: store.ChangeDeleted}); err != nil {
		t.Fatal(err)
	} else if got, err := DecodeChange(1, b); err != nil || got.Kind != store.ChangeDeleted || !got.At.Equal(time.Unix(0, 0)) {
		t.Errorf("a deletion without a time reads back as %+v, %v", got, err)
	}
	if _, err := EncodeChange(&store.Change{Key: rec.Key}); err == nil {
		t.Error("an entry of no kind was encoded")
	}
	for _, bad := range [][]byte{{0xff}, {1<<3 | 2, 5, 'a'}, {}, {4<<3 | 2, 2, 1<<3 | 2, 1}} {
		if _, err := DecodeChange(1, bad); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("DecodeChange(%x): %v, want ErrCorrupt", bad, err)
		}
	}
}

// BenchmarkDecisionEntry measures the change-feed entry of a decision
// made on its own (alone: EncodeChange) and, as an update makes it, with
// its record (withRecord: EncodeWrite, the record and the entry).
func BenchmarkDecisionEntry(b *testing.B) {
	rec, _ := statusRecord()
	e := store.Change{Key: rec.Key, Decision: rec.Last}
	b.Run("alone", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := EncodeChange(&e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("withRecord", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := EncodeWrite(&rec, []store.Change{e}, Compress); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestApplyBounds: Apply keeps the newest events and history entries
// within Limits, and a zero limit bounds nothing.
func TestApplyBounds(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	fill := func(r *target.Record) error {
		for i := range 5 {
			r.Events = append(r.Events, target.Event{Kind: target.EventApplied, To: int32(i), At: at.Add(time.Duration(i) * time.Second)})
			r.History.Recommendations = append(r.History.Recommendations, engine.Recommendation{Replicas: int32(i), At: at.Add(time.Duration(i) * time.Second)})
		}
		return nil
	}
	for _, tc := range []struct {
		l                   Limits
		wantEvents, wantRec int
	}{{Limits{MaxEvents: 2, MaxHistory: 3}, 2, 3}, {Limits{}, 5, 5}} {
		rec := target.Record{}
		entries, err := Apply(target.Key{Name: "x"}, &rec, false, tc.l, fill)
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.Events) != tc.wantEvents || len(rec.History.Recommendations) != tc.wantRec {
			t.Errorf("%+v: %d events, %d recommendations; want %d, %d", tc.l, len(rec.Events), len(rec.History.Recommendations), tc.wantEvents, tc.wantRec)
		}
		if len(rec.Events) > 0 && rec.Events[len(rec.Events)-1].To != 4 {
			t.Errorf("%+v: the newest event was dropped: %+v", tc.l, rec.Events)
		}
		if len(entries) != 5 || !entries[0].Created || rec.Key.Name != "x" {
			t.Errorf("%+v: %d entries (first created %v), key %v; want 5 observations, the first creating x", tc.l, len(entries), len(entries) > 0 && entries[0].Created, rec.Key)
		}
	}
}
