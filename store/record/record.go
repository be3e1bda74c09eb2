// Package record is the stored form of Setpoint's per-target data, shared
// by every backend of package store (the bbolt file and etcd), so that
// both keep the same bytes:
//
//   - a target.Record is stored as its storage message,
//     setpoint.storage.v1.Record (proto/setpoint/storage/v1/storage.proto),
//     compressed with S2 and a dictionary when that is smaller (Encode,
//     Decode, compress.go);
//   - a change-feed entry, a store.Change, as setpoint.storage.v1.Change
//     (EncodeChange, DecodeChange), and a write's changes are what Apply
//     finds it recorded;
//   - a decision-log entry as setpoint.storage.v1.LoggedDecision
//     (EncodeLogged, DecodeLogged);
//   - a target's key as ordered bytes (Key, ParseKey, KeyPrefix,
//     DecisionKey).
//
// Messages are marshalled and unmarshalled by generated code
// (planetscale/vtprotobuf's MarshalVT and UnmarshalVT): every field
// number is written once, in the .proto, and `buf breaking` guards it.
// This package only converts between the engine's values and the
// messages, and frames the bytes.
//
// Encoding fails on what could not be read back (a time outside the years
// 1–9999, a string that is not UTF-8). Decoding fails on anything that is
// not a valid message, and never panics: a caller reports its error as a
// corrupt record of that target, and the process stays up.
package record

import (
	"bytes"
	"fmt"

	"github.com/setpointhq/setpoint/engine"
	pb "github.com/setpointhq/setpoint/proto/setpoint/storage/v1"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
)

// Encode returns the stored form of rec: its storage message, marshalled
// and compressed. rec.Key is not part of it: the key is the bucket key.
func Encode(rec *target.Record) ([]byte, error) {
	val, _, err := EncodeWrite(rec, nil, Compress)
	return val, err
}

// EncodeWrite returns the stored form of rec, compressed with compress
// (Compress, or a way to run it elsewhere; it may return its argument),
// and of changes, the change-feed entries of the write that left rec
// (vals[i] is changes[i]'s). A decision entry of rec's last decision is
// marshalled from the record's own message, not converted again: it is
// most of the record.
func EncodeWrite(rec *target.Record, entries []store.Change, compress func([]byte) []byte) (val []byte, vals [][]byte, err error) {
	e := getEncoder()
	defer putEncoder(e)
	m, err := recordMessage(e, rec)
	if err != nil {
		return nil, nil, err
	}
	defer m.ReturnToVTPool()
	buf := getScratch()
	n := m.SizeVT()
	b := *buf
	if cap(b) < n {
		b = make([]byte, n)
	}
	b = b[:n]
	if _, err := m.MarshalToSizedBufferVT(b); err != nil {
		putScratch(buf, b)
		return nil, nil, fmt.Errorf("record: encode %s: %w", rec.Key, err)
	}
	val = compress(b)
	if len(val) > 0 && &val[0] == &b[0] { // stored as it is
		val = bytes.Clone(val)
	}
	putScratch(buf, b)
	if len(entries) > 0 {
		vals = make([][]byte, len(entries))
		for i := range entries {
			en := &entries[i]
			if en.Decision != nil && rec.Last != nil && en.Decision.ID == rec.Last.ID && m.Last != nil {
				// The record is marshalled: its last decision's message
				// becomes the entry's.
				vals[i], err = marshalLastEntry(en, m)
			} else {
				vals[i], err = EncodeChange(en)
			}
			if err != nil {
				return nil, nil, err
			}
		}
	}
	return val, vals, nil
}

// marshalLastEntry returns the stored form of en, the change-feed entry of
// the last decision of the record whose message is m, marshalled from m's
// own messages (entryDecision), and leaves m as it was: whole, and with no
// message in it twice, for its pools.
func marshalLastEntry(en *store.Change, m *pb.Record) ([]byte, error) {
	l := m.Last
	before, history, same := l.Before, l.GetDecision().GetHistory(), l.DecisionStatusIsRecordStatus
	b, err := marshalEntry(en, &pb.Change{Kind: &pb.Change_Decision{Decision: entryDecision(l, m.Status)}})
	l.Before, l.DecisionStatusIsRecordStatus = before, same
	if l.Decision != nil {
		l.Decision.History = history
		if same {
			l.Decision.Status = nil
		}
	}
	return b, err
}

// Marshal returns the storage message of rec as it is before compression:
// a sample for training the dictionary of stored values (values2.dict).
func Marshal(rec *target.Record) ([]byte, error) {
	e := getEncoder()
	defer putEncoder(e)
	m, err := recordMessage(e, rec)
	if err != nil {
		return nil, err
	}
	defer m.ReturnToVTPool()
	return m.MarshalVT()
}

// Decode parses the stored form of the record of k. Its error is a
// *store.CorruptError.
func Decode(k target.Key, b []byte) (target.Record, error) {
	return DecodeFor(k, b, false)
}

// DecodeFor is Decode, but with forDecision for the record's last decision
// only ID and At are set (what store.Store.Decide's function reads): the
// rest, the largest part of a record, is unmarshalled but neither
// converted nor checked. It accepts all that Decode accepts.
func DecodeFor(k target.Key, b []byte, forDecision bool) (target.Record, error) {
	rec, err := decode(k, b, forDecision)
	if err != nil {
		return target.Record{}, &store.CorruptError{Key: k, Err: err}
	}
	return rec, nil
}

func decode(k target.Key, b []byte, forDecision bool) (_ target.Record, err error) {
	defer noPanic(&err)
	// The messages are kept across decodes (vtprotobuf's pool,
	// buf.gen.yaml): the conversion copies all it keeps but maps, which
	// ResetVT lets go of rather than clears.
	m := pb.RecordFromVTPool()
	defer m.ReturnToVTPool()
	if err := unmarshalStored(b, m); err != nil {
		return target.Record{}, err
	}
	return recordFromMessage(k, m, forDecision)
}

// noPanic, deferred, turns a panic while decoding into *err. The generated
// code and the conversion check every length and index they use; this is
// the last line of the promise that bad bytes never take the process down.
func noPanic(err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("panic while decoding: %v", p)
	}
}

// unmarshalStored unmarshals into m the record stored as v (Encode's form),
// decompressing it into a scratch buffer (the generated code copies what
// it keeps).
func unmarshalStored(v []byte, m *pb.Record) error {
	buf := getScratch()
	b, err := decompressInto(*buf, v)
	if err != nil {
		return err
	}
	if compressed(v) { // b is the scratch buffer's, or a new one
		defer putScratch(buf, b)
	}
	return m.UnmarshalVT(b)
}

// recordMessage returns the storage message of rec, made of e's messages
// and times (encoder): the caller hands it back with ReturnToVTPool once
// it is marshalled, before e (putEncoder).
func recordMessage(e *encoder, rec *target.Record) (*pb.Record, error) {
	ref := pb.TargetRefFromVTPool()
	*ref = pb.TargetRef{ApiVersion: e.s(rec.Ref.APIVersion), Kind: e.s(rec.Ref.Kind), Name: e.s(rec.Ref.Name)}
	m := pb.RecordFromVTPool()
	*m = pb.Record{
		TargetRef: ref,
		Spec:      e.spec(rec.Spec),
		Settings:  e.settings(rec.Settings),
		Status:    e.status(rec.Status),
		History:   e.history(rec.History),
		Events:    fill(m.Events, rec.Events, e.event),
		LastSeen:  e.time(rec.LastSeen),
		// Copies into the lists the pool keeps; empty is not stored.
		ReceivedSpec: append(m.ReceivedSpec[:0], rec.ReceivedSpec...),
		Fleet:        append(m.Fleet[:0], rec.Fleet...),
		Forecasts: fill(m.Forecasts, rec.Forecasts, func(f target.MetricHistory, m *pb.MetricHistory) {
			*m = pb.MetricHistory{Metric: e.s(f.Metric), History: append(m.History[:0], f.History...)}
		}),
	}
	if rec.Last != nil {
		m.Last = e.lastDecision(rec.Last, &rec.Status)
	}
	if e.err != nil {
		m.ReturnToVTPool()
		return nil, fmt.Errorf("record: encode %s: %w", rec.Key, e.err)
	}
	return m, nil
}

// recordFromMessage converts m, the storage message of the record of k,
// to the record; with forDecision, of the last decision only its ID and
// At. The record shares m's maps.
func recordFromMessage(k target.Key, m *pb.Record, forDecision bool) (target.Record, error) {
	var d decoder
	rec := target.Record{
		Key:      k,
		Ref:      target.Ref{APIVersion: d.s(m.GetTargetRef().GetApiVersion()), Kind: d.s(m.GetTargetRef().GetKind()), Name: d.s(m.GetTargetRef().GetName())},
		Spec:     d.spec(m.GetSpec()),
		Settings: d.settings(m.GetSettings()),
		Status:   d.status(m.GetStatus()),
		History:  d.history(m.GetHistory()),
		Events:   mapSlice(m.GetEvents(), d.event),
		LastSeen: d.time(m.GetLastSeen()),
		// A copy: the message's bytes may alias the decoded buffer.
		ReceivedSpec: string(m.GetReceivedSpec()),
		Forecasts:    mapSlice(m.GetForecasts(), d.metricHistory),
		Fleet:        string(m.GetFleet()), // a copy, as ReceivedSpec
	}
	if l := m.GetLast(); l != nil {
		if forDecision {
			rec.Last = &target.LastDecision{ID: d.s(l.GetId()), At: d.time(l.GetAt())}
		} else {
			rec.Last = d.lastDecision(l, m.GetStatus())
		}
	}
	if d.err != nil {
		return target.Record{}, d.err
	}
	return rec, nil
}

// entryDecision turns l, a decision's message, into a feed entry's, in
// place: without Before and history (a feed entry's Decision), its status its own
// (record, the record's status, when stored once).
func entryDecision(l *pb.LastDecision, record *pb.Status) *pb.LastDecision {
	l.Before = nil
	if l.Decision != nil {
		l.Decision.History = nil
		if l.DecisionStatusIsRecordStatus {
			l.Decision.Status, l.DecisionStatusIsRecordStatus = record, false
		}
	}
	return l
}

// statusRefs is status for target.LastDecision.Before: each condition equal to
// one of record (the record's status conditions) is stored as a reference
// to it (Status.condition_refs); without any such condition it is status.
func (e *encoder) statusRefs(v engine.Status, record []engine.Condition) *pb.Status {
	var refs []int32
	var own []engine.Condition
	for _, c := range v.Conditions {
		i := -1
		for j := range record {
			if conditionEqual(record[j], c) {
				i = j
				break
			}
		}
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
	m.ConditionRefs = append(m.ConditionRefs, refs...)
	return m
}

// metricHistory converts a forecast history, copying its bytes (the
// message's may alias the decoded buffer).
func (d *decoder) metricHistory(m *pb.MetricHistory) target.MetricHistory {
	return target.MetricHistory{Metric: d.s(m.GetMetric()), History: string(m.GetHistory())}
}
