package store

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/setpointhq/setpoint/engine"
	pb "github.com/setpointhq/setpoint/proto/setpoint/storage/v1"
	"github.com/setpointhq/setpoint/target"
)

// checkDecisionChange fails t unless the change entry of rec's last
// decision assembled from the marshalled record is the one marshalChange
// gives; created is the change's Created.
func checkDecisionChange(t *testing.T, rec target.Record, created bool) {
	t.Helper()
	if err := sameDecisionChange(rec, created); err != nil {
		t.Error(err)
	}
}

// sameDecisionChange is checkDecisionChange's check; rec must encode.
func sameDecisionChange(rec target.Record, created bool) error {
	m, err := recordMessage(&rec)
	if err != nil {
		return err
	}
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return err
	}
	cs := feedMark(&target.Record{}, !created).changes(rec.Key, &rec)
	if len(cs) == 0 || cs[0].Kind != ChangeDecision {
		return fmt.Errorf("no decision change for %+v", rec.Last)
	}
	c := &cs[0]
	want, err := marshalChange(c, decisionOfRecord(m))
	if err != nil {
		return err
	}
	got, ok := decisionChangeOfRecord(c, raw)
	if !ok || !bytes.Equal(got, want) {
		return fmt.Errorf("assembled entry (ok %v)\n%x\nmarshalled\n%x", ok, got, want)
	}
	if back, err := decodeChange(1, got); err != nil || back.Decision == nil || back.Decision.ID != rec.Last.ID {
		return fmt.Errorf("the assembled entry decodes to %+v, %v", back, err)
	}
	return nil
}

// TestDecisionChangeOfRecord: a decision's change-feed entry assembled
// from the bytes of the record is byte for byte the marshalled one.
func TestDecisionChangeOfRecord(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*target.Record)
	}{
		{"decision status is the record's", func(*target.Record) {}},
		{"status changed since", func(r *target.Record) { r.Status.DesiredReplicas++ }},
		{"two metrics and a history", func(r *target.Record) { *r = cacheRecord(7) }},
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
				checkDecisionChange(t, rec, created)
			}
		})
	}
	t.Run("a key that is not UTF-8", func(t *testing.T) {
		rec, _ := statusRecord()
		m, _ := recordMessage(&rec)
		raw, _ := proto.Marshal(m)
		c := &Change{Key: target.Key{Name: "\xff"}, Kind: ChangeDecision, Decision: rec.Last}
		if _, ok := decisionChangeOfRecord(c, raw); ok {
			t.Error("an entry of a key that is not UTF-8 was assembled")
		}
	})
	t.Run("not a record", func(t *testing.T) {
		rec, _ := statusRecord()
		for _, raw := range [][]byte{nil, {0xff}, {6<<3 | 2, 5, 1}} {
			if _, ok := decisionChangeOfRecord(&Change{Key: rec.Key, Kind: ChangeDecision, Decision: rec.Last}, raw); ok {
				t.Errorf("an entry was assembled from %x", raw)
			}
		}
	})
}

// BenchmarkDecisionChange measures encoding a decision's change-feed
// entry from the record's message (marshal) and assembling it from the
// marshalled record (assemble), as Update does.
func BenchmarkDecisionChange(b *testing.B) {
	rec := cacheRecord(0)
	m, err := recordMessage(&rec)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	c := &feedMark(&target.Record{}, true).changes(rec.Key, &rec)[0]
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := marshalChange(c, decisionOfRecord(m)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("assemble", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := decisionChangeOfRecord(c, raw); !ok {
				b.Fatal("not assembled")
			}
		}
	})
}

// decisionOfRecord is the oracle of decisionChangeOfRecord: the change
// feed's message of the last decision of the record message m (m.Last
// set), sharing m's messages: the explanation, and the status when the
// decision's status is the record's.
func decisionOfRecord(m *pb.Record) *pb.LastDecision {
	l, d := m.GetLast(), m.GetLast().GetDecision()
	status := d.GetStatus()
	if l.GetDecisionStatusIsRecordStatus() {
		status = m.GetStatus()
	}
	return &pb.LastDecision{Id: l.GetId(), At: l.GetAt(), From: l.From, Decision: &pb.Decision{
		DesiredReplicas: d.GetDesiredReplicas(), Rescale: d.GetRescale(), Error: d.GetError(),
		Status: status, Explanation: d.GetExplanation(),
	}}
}
