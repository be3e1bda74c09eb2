package store

// The storage message path the record encoder (codec_wire.go) replaced,
// kept as its oracle: a record converted to its generated message,
// setpoint.storage.v1.Record, and marshalled by proto.Marshal.
// FuzzRecordEncoder and the codec tests check that the encoder writes the
// same bytes.

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/setpointhq/setpoint/engine"
	pb "github.com/setpointhq/setpoint/proto/setpoint/storage/v1"
	"github.com/setpointhq/setpoint/target"
)

// recordMessage returns the storage message of rec, before marshalling.
func recordMessage(rec *target.Record) (*pb.Record, error) {
	e := encoder{stamps: make([]timestamppb.Timestamp, 0, timesIn(rec))}
	m := &pb.Record{
		TargetRef: &pb.TargetRef{ApiVersion: rec.Ref.APIVersion, Kind: rec.Ref.Kind, Name: rec.Ref.Name},
		Spec:      e.spec(rec.Spec),
		Settings:  e.settings(rec.Settings),
		Status:    e.status(rec.Status),
		History:   e.history(rec.History),
		Events:    mapMessages(rec.Events, e.event),
		LastSeen:  e.time(rec.LastSeen),
	}
	if l := rec.Last; l != nil {
		// Schema version 2: equal statuses are stored once. The decision's
		// status is the record's until an observation changes the latter,
		// and the status before the decision shares most conditions with it.
		same := statusEqual(l.Decision.Status, rec.Status)
		d := l.Decision
		if same {
			d.Status = engine.Status{}
		}
		m.Last = &pb.LastDecision{Id: l.ID, At: e.time(l.At), Decision: e.decision(d), Before: e.statusRefs(l.Before, rec.Status.Conditions), From: &l.From}
		if same {
			m.Last.Decision.Status = nil
			m.Last.DecisionStatusIsRecordStatus = true
		}
	}
	if e.err != nil {
		return nil, fmt.Errorf("store: encode record %s: %w", rec.Key, e.err)
	}
	return m, nil
}

// timesIn is how many times rec's message holds at most: its timestamps,
// allocated at once (a time stored once, or zero, takes none).
func timesIn(rec *target.Record) int {
	status := func(s *engine.Status) int { return 1 + len(s.Conditions) }
	history := func(h *engine.History) int {
		return len(h.Recommendations) + len(h.ScaleUpEvents) + len(h.ScaleDownEvents)
	}
	n := 1 + status(&rec.Status) + history(&rec.History) + len(rec.Events)
	if l := rec.Last; l != nil {
		n += 1 + status(&l.Decision.Status) + status(&l.Before) + history(&l.Decision.History)
	}
	return n
}

// marshalRecord returns the stored form of m, the message of the record
// of k, as the store wrote it before the direct encoder (codec_wire.go):
// marshalled deterministically (map entries sorted), then compressed
// with compress.
func marshalRecord(k target.Key, m *pb.Record, compress func([]byte) []byte) ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("store: encode record %s: %w", k, err)
	}
	return compress(b), nil
}

// statusRefs is status for target.LastDecision.Before: each condition equal to
// one of record (the record's status conditions) is stored as a reference
// to it (Status.condition_refs); without any such condition it is status.
func (e *encoder) statusRefs(v engine.Status, record []engine.Condition) *pb.Status {
	var refs []int32
	var own []engine.Condition
	for _, c := range v.Conditions {
		i := slices.IndexFunc(record, func(r engine.Condition) bool { return conditionEqual(r, c) })
		if i < 0 {
			own = append(own, c)
		}
		refs = append(refs, int32(i))
	}
	if len(own) == len(v.Conditions) {
		return e.status(v)
	}
	v.Conditions = own
	m := e.status(v)
	m.ConditionRefs = refs
	return m
}
