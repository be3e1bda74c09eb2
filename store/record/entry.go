package record

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/setpointhq/setpoint/engine"
	pb "github.com/setpointhq/setpoint/proto/setpoint/storage/v1"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
)

// A change-feed entry is stored as setpoint.storage.v1.Change: what one
// write recorded for one target, a store.Change without its revision (a
// backend keeps the revision in the key). A decision's entry leaves out
// Before and Decision.History: the record keeps them.

// EncodeChange returns the stored form of e, a decision (Decision set), an
// observation (Event set) or a deletion (Kind store.ChangeDeleted, at At).
func EncodeChange(e *store.Change) ([]byte, error) {
	enc := getEncoder()
	defer putEncoder(enc)
	m := &pb.Change{}
	switch {
	case e.Decision != nil:
		l := entryDecision(enc.lastDecision(e.Decision, nil), nil)
		defer l.ReturnToVTPool() // before enc: it holds l's times
		m.Kind = &pb.Change_Decision{Decision: l}
	case e.Event != nil:
		ev := &pb.Event{}
		enc.event(*e.Event, ev)
		m.Kind = &pb.Change_Observation{Observation: ev}
	case e.Kind == store.ChangeDeleted:
		at := enc.time(e.At)
		if at == nil {
			// Stored as an empty Timestamp (1970-01-01), as protobuf-go
			// marshals an absent message of a oneof; the generated code
			// miscounts the size of an absent one.
			at = &timestamppb.Timestamp{}
		}
		m.Kind = &pb.Change_Deleted{Deleted: at}
	default:
		return nil, fmt.Errorf("record: encode change of %s: no kind", e.Key)
	}
	if enc.err != nil {
		return nil, fmt.Errorf("record: encode change of %s: %w", e.Key, enc.err)
	}
	return marshalEntry(e, m)
}

// EncodeChanges returns the stored form of each change (EncodeChange).
func EncodeChanges(cs []store.Change) ([][]byte, error) {
	vals := make([][]byte, len(cs))
	for i := range cs {
		var err error
		if vals[i], err = EncodeChange(&cs[i]); err != nil {
			return nil, err
		}
	}
	return vals, nil
}

// marshalEntry sets the fields of m, e's message with its kind already
// set, but for the kind, and marshals it.
func marshalEntry(e *store.Change, m *pb.Change) ([]byte, error) {
	var enc encoder
	m.Cluster, m.Namespace, m.Name = enc.s(e.Key.Cluster), enc.s(e.Key.Namespace), enc.s(e.Key.Name)
	m.Created = e.Created
	if enc.err != nil {
		return nil, fmt.Errorf("record: encode change of %s: %w", e.Key, enc.err)
	}
	return m.MarshalVT()
}

// DecodeChange parses the stored change-feed entry of revision rev; its
// error matches store.ErrCorrupt.
func DecodeChange(rev uint64, b []byte) (store.Change, error) {
	c, err := decodeChange(b)
	if err != nil {
		return store.Change{}, fmt.Errorf("%w: change %d: %v", store.ErrCorrupt, rev, err)
	}
	c.Revision = rev
	return c, nil
}

func decodeChange(b []byte) (e store.Change, err error) {
	defer noPanic(&err)
	var m pb.Change
	if err := m.UnmarshalVT(b); err != nil {
		return store.Change{}, err
	}
	var d decoder
	e = store.Change{Key: target.Key{Cluster: d.s(m.GetCluster()), Namespace: d.s(m.GetNamespace()), Name: d.s(m.GetName())}, Created: m.GetCreated()}
	switch k := m.GetKind().(type) {
	case *pb.Change_Decision:
		// Before, which entries written by older versions carry, is left
		// out as new entries leave it out.
		entryDecision(k.Decision, nil)
		e.Kind, e.Decision = store.ChangeDecision, d.lastDecision(k.Decision, nil)
	case *pb.Change_Observation:
		ev := d.event(k.Observation)
		e.Kind, e.Event = store.ChangeObservation, &ev
	case *pb.Change_Deleted:
		e.Kind, e.At = store.ChangeDeleted, d.time(k.Deleted)
	default:
		return store.Change{}, errors.New("no kind")
	}
	if d.err != nil {
		return store.Change{}, d.err
	}
	return e, nil
}

// DecisionChange returns the change of revision rev recording the last
// decision of the record of k stored as b (Encode's form), with Created
// set to created: the entry EncodeWrite makes of it, read back from the
// record, for a backend that stores the record and not the entry. Its
// error matches store.ErrCorrupt.
func DecisionChange(rev uint64, k target.Key, b []byte, created bool) (store.Change, error) {
	c, err := decisionChange(k, b, created)
	if err != nil {
		return store.Change{}, fmt.Errorf("%w: change %d: %v", store.ErrCorrupt, rev, err)
	}
	c.Revision = rev
	return c, nil
}

func decisionChange(k target.Key, b []byte, created bool) (e store.Change, err error) {
	defer noPanic(&err)
	var m pb.Record
	if err := unmarshalStored(b, &m); err != nil {
		return store.Change{}, err
	}
	if m.GetLast() == nil {
		return store.Change{}, errors.New("the record holds no decision")
	}
	var d decoder
	e = store.Change{Key: k, Kind: store.ChangeDecision, Created: created, Decision: d.lastDecision(entryDecision(m.Last, m.Status), nil)}
	if d.err != nil {
		return store.Change{}, d.err
	}
	return e, nil
}

// Limits bound what a write leaves in a record.
type Limits struct {
	// MaxEvents bounds target.Record.Events (the newest are kept); 0
	// bounds nothing.
	MaxEvents int
	// MaxHistory bounds each list of target.Record.History (the newest
	// are kept); 0 bounds nothing.
	MaxHistory int
}

// Apply runs a write's fn on rec, the record of key as read (existed says
// it was stored), and returns the changes the feed records for it, without
// revisions:
// a decision when the record's last decision is a new one, an observation
// per event added. It leaves rec as it is to be stored: key restored and
// bounded by l. A panic in fn is not recovered.
func Apply(key target.Key, rec *target.Record, existed bool, l Limits, fn func(*target.Record) error) ([]store.Change, error) {
	var hadLast bool
	var lastID string
	if rec.Last != nil {
		hadLast, lastID = true, rec.Last.ID
	}
	events := len(rec.Events)
	if err := fn(rec); err != nil {
		return nil, err
	}
	var out []store.Change
	if rec.Last != nil && (!hadLast || rec.Last.ID != lastID) {
		d := *rec.Last
		d.Before, d.Decision.History = engine.Status{}, engine.History{}
		out = append(out, store.Change{Key: key, Kind: store.ChangeDecision, Decision: &d})
	}
	// Writers only append events (the oldest are trimmed below), so a
	// record left with more events than it had holds the new ones at the
	// end.
	if len(rec.Events) > events {
		for _, e := range rec.Events[events:] {
			out = append(out, store.Change{Key: key, Kind: store.ChangeObservation, Event: &e})
		}
	}
	if len(out) > 0 && !existed {
		out[0].Created = true
	}
	rec.Key = key
	bound(rec, l)
	return out, nil
}

// bound keeps rec's newest l.MaxEvents events and l.MaxHistory entries of
// each history list.
func bound(rec *target.Record, l Limits) {
	if n := len(rec.Events); l.MaxEvents > 0 && n > l.MaxEvents {
		rec.Events = slices.Clone(rec.Events[n-l.MaxEvents:])
	}
	if l.MaxHistory <= 0 {
		return
	}
	h := &rec.History
	h.Recommendations = newest(h.Recommendations, l.MaxHistory, func(r engine.Recommendation) time.Time { return r.At })
	h.ScaleUpEvents = newest(h.ScaleUpEvents, l.MaxHistory, func(e engine.ScaleEvent) time.Time { return e.At })
	h.ScaleDownEvents = newest(h.ScaleDownEvents, l.MaxHistory, func(e engine.ScaleEvent) time.Time { return e.At })
}

// newest keeps the max entries of s with the latest times, in their order
// in s. The engine overwrites entries in place, so s is not sorted by time.
func newest[T any](s []T, max int, at func(T) time.Time) []T {
	if len(s) <= max {
		return s
	}
	idx := make([]int, len(s))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(i, j int) int { return at(s[j]).Compare(at(s[i])) }) // newest first
	keep := idx[:max]
	slices.Sort(keep)
	out := make([]T, 0, max)
	for _, i := range keep {
		out = append(out, s[i])
	}
	return out
}
