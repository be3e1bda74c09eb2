package store

// The record encoder writes a target.Record's storage message,
// setpoint.storage.v1.Record, straight in protobuf's wire format with
// protowire: no message is built and nothing is reflected on. Its bytes
// are exactly those proto.MarshalOptions{Deterministic: true} gives for
// the message the record converts to (the conversion, recordMessage, is
// kept in codec_oracle_test.go): fields in number order, a field of a
// zero scalar or empty string left out (proto3's implicit presence), a
// double of -0 written, a message field written when the conversion sets
// it (even empty), an optional field whenever it is set, repeated int32s
// packed, and map entries sorted by key, each with its key and value.
// FuzzRecordEncoder compares the two on random records. Strings that are
// not UTF-8 and times a Timestamp cannot hold fail, as they fail the
// marshaller.

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/target"
)

// errNotUTF8 reports a string a storage message cannot hold.
var errNotUTF8 = errors.New("string field is not valid UTF-8")

// Timestamp bounds (google.protobuf.Timestamp): 0001-01-01T00:00:00Z and
// 9999-12-31T23:59:59Z in seconds since the Unix epoch.
const (
	minTimestampSeconds = -62135596800
	maxTimestampSeconds = 253402300799
)

// appendRecord appends the storage message of rec, marshalled, to b. The
// key is not part of it: the key is the bucket key.
func appendRecord(b []byte, rec *target.Record) ([]byte, error) {
	w := wireWriter{b: b}
	w.record(rec)
	if w.err != nil {
		return b, fmt.Errorf("store: encode record %s: %w", rec.Key, w.err)
	}
	return w.b, nil
}

// wireWriter appends protobuf fields to b, keeping the first error. A
// nested message is written as a tag, a length byte and the content, and
// the length fixed (the content moved when it needs more than one byte)
// once the content is written: no sizes are computed beforehand.
type wireWriter struct {
	b   []byte
	err error
}

// begin starts the message field num; end(begin(num)) closes it.
func (w *wireWriter) begin(num protowire.Number) int {
	w.tag(num, protowire.BytesType)
	w.b = append(w.b, 0)
	return len(w.b)
}

// end closes the message field whose content starts at start.
func (w *wireWriter) end(start int) {
	n := len(w.b) - start
	if n < 0x80 {
		w.b[start-1] = byte(n)
		return
	}
	k := protowire.SizeVarint(uint64(n))
	w.b = append(w.b, make([]byte, k-1)...)
	copy(w.b[start+k-1:], w.b[start:start+n])
	protowire.AppendVarint(w.b[:start-1], uint64(n))
}

// str writes a string field, unless s is empty.
func (w *wireWriter) str(num protowire.Number, s string) {
	if s != "" {
		w.strAlways(num, s)
	}
}

// strAlways writes a string field even when s is empty (an element of a
// repeated field, a map entry's key or value).
func (w *wireWriter) strAlways(num protowire.Number, s string) {
	if !utf8.ValidString(s) && w.err == nil {
		w.err = errNotUTF8
	}
	w.tag(num, protowire.BytesType)
	w.varint(uint64(len(s)))
	w.b = append(w.b, s...)
}

// tag writes a field's tag: one byte for the field numbers below 16 that
// every storage message uses.
func (w *wireWriter) tag(num protowire.Number, typ protowire.Type) {
	if num < 16 {
		w.b = append(w.b, byte(num)<<3|byte(typ))
		return
	}
	w.b = protowire.AppendTag(w.b, num, typ)
}

// varint writes v as a varint.
func (w *wireWriter) varint(v uint64) {
	if v < 0x80 {
		w.b = append(w.b, byte(v))
		return
	}
	w.b = protowire.AppendVarint(w.b, v)
}

// int32 writes an int32 field (sign-extended, as protobuf's int32 is),
// unless v is 0.
func (w *wireWriter) int32(num protowire.Number, v int32) {
	if v != 0 {
		w.int64Always(num, int64(v))
	}
}

// int64 writes an int64 field, unless v is 0.
func (w *wireWriter) int64(num protowire.Number, v int64) {
	if v != 0 {
		w.int64Always(num, v)
	}
}

// int64Always writes an int64 (or int32) field, also when v is 0.
func (w *wireWriter) int64Always(num protowire.Number, v int64) {
	w.tag(num, protowire.VarintType)
	w.varint(uint64(v))
}

// bool writes a bool field, unless v is false.
func (w *wireWriter) bool(num protowire.Number, v bool) {
	if v {
		w.tag(num, protowire.VarintType)
		w.b = append(w.b, 1)
	}
}

// double writes a double field, unless v is +0 (-0 is written).
func (w *wireWriter) double(num protowire.Number, v float64) {
	if v != 0 || math.Signbit(v) {
		w.tag(num, protowire.Fixed64Type)
		w.b = protowire.AppendFixed64(w.b, math.Float64bits(v))
	}
}

// seconds writes a Timestamp or Duration of seconds and nanos as the
// message field num.
func (w *wireWriter) seconds(num protowire.Number, sec int64, nanos int32) {
	n := 0
	if sec != 0 {
		n += 1 + protowire.SizeVarint(uint64(sec))
	}
	if nanos != 0 {
		n += 1 + protowire.SizeVarint(uint64(int64(nanos)))
	}
	w.tag(num, protowire.BytesType)
	w.b = append(w.b, byte(n)) // at most 22
	w.int64(1, sec)
	w.int32(2, nanos)
}

// time writes a google.protobuf.Timestamp, unless t is the zero time.
func (w *wireWriter) time(num protowire.Number, t time.Time) {
	if t.IsZero() {
		return
	}
	sec := t.Unix()
	if (sec < minTimestampSeconds || sec > maxTimestampSeconds) && w.err == nil {
		w.err = fmt.Errorf("%w: %v", errTimeRange, t)
	}
	w.seconds(num, sec, int32(t.Nanosecond()))
}

// duration writes a google.protobuf.Duration, unless d is 0.
func (w *wireWriter) duration(num protowire.Number, d time.Duration) {
	if d != 0 {
		ns := d.Nanoseconds()
		w.seconds(num, ns/1e9, int32(ns%1e9))
	}
}

func (w *wireWriter) record(rec *target.Record) {
	ref := engine.ObjectReference(rec.Ref) // TargetRef has ObjectReference's fields
	w.objectReference(1, &ref)
	w.spec(2, &rec.Spec)
	w.settings(3, &rec.Settings)
	w.status(4, &rec.Status, nil)
	w.history(5, &rec.History)
	if l := rec.Last; l != nil {
		w.last(6, l, &rec.Status)
	}
	for i := range rec.Events {
		w.event(7, &rec.Events[i])
	}
	w.time(8, rec.LastSeen)
}

// last writes a LastDecision of a record whose status is status. Schema
// version 2: the decision's status is left out when it is stored alike
// as the record's, and Before's conditions equal to one of the record's
// are stored as references to it.
func (w *wireWriter) last(num protowire.Number, l *target.LastDecision, status *engine.Status) {
	start := w.begin(num)
	w.str(1, l.ID)
	w.time(2, l.At)
	same := statusEqual(l.Decision.Status, *status)
	w.decision(3, &l.Decision, same)
	w.status(4, &l.Before, status.Conditions)
	w.bool(5, same)
	w.int64Always(6, int64(l.From)) // optional: present even when 0
	w.end(start)
}

func (w *wireWriter) event(num protowire.Number, e *target.Event) {
	start := w.begin(num)
	w.str(1, string(e.Kind))
	w.int32(2, e.From)
	w.int32(3, e.To)
	w.time(4, e.At)
	w.str(5, e.DecisionID)
	w.str(6, e.Message)
	w.end(start)
}

func (w *wireWriter) settings(num protowire.Number, s *engine.Settings) {
	start := w.begin(num)
	w.double(1, s.Tolerance)
	w.duration(2, s.CPUInitializationPeriod)
	w.duration(3, s.InitialReadinessDelay)
	w.duration(4, s.DownscaleStabilizationWindow)
	w.end(start)
}

func (w *wireWriter) spec(num protowire.Number, s *engine.Spec) {
	start := w.begin(num)
	w.int32(1, s.MinReplicas)
	w.int32(2, s.MaxReplicas)
	for i := range s.Metrics {
		w.metricSpec(3, &s.Metrics[i])
	}
	if b := s.Behavior; b != nil {
		bs := w.begin(4)
		w.rules(1, &b.ScaleUp)
		w.rules(2, &b.ScaleDown)
		w.end(bs)
	}
	w.end(start)
}

func (w *wireWriter) metricSpec(num protowire.Number, m *engine.MetricSpec) {
	start := w.begin(num)
	w.str(1, string(m.Type))
	w.str(2, m.Resource)
	w.str(3, m.Container)
	w.metricIdentifier(4, &m.Metric)
	w.objectReference(5, &m.DescribedObject)
	t := w.begin(6)
	w.str(1, string(m.Target.Type))
	w.int64(2, m.Target.Milli)
	w.int32(3, m.Target.Utilization)
	w.end(t)
	w.end(start)
}

func (w *wireWriter) metricIdentifier(num protowire.Number, m *engine.MetricIdentifier) {
	start := w.begin(num)
	w.str(1, m.Name)
	if s := m.Selector; s != nil {
		ss := w.begin(2)
		w.matchLabels(1, s.MatchLabels)
		for i := range s.MatchExpressions {
			r := &s.MatchExpressions[i]
			rs := w.begin(2)
			w.str(1, r.Key)
			w.str(2, r.Operator)
			for _, v := range r.Values {
				w.strAlways(3, v)
			}
			w.end(rs)
		}
		w.end(ss)
	}
	w.end(start)
}

// matchLabels writes a map<string, string>, its entries in key order.
func (w *wireWriter) matchLabels(num protowire.Number, m map[string]string) {
	switch len(m) {
	case 0:
		return
	case 1:
		for k, v := range m {
			w.mapEntry(num, k, v)
		}
		return
	}
	var buf [8]string // on the stack for a selector of up to 8 labels
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		w.mapEntry(num, k, m[k])
	}
}

func (w *wireWriter) mapEntry(num protowire.Number, k, v string) {
	start := w.begin(num)
	w.strAlways(1, k)
	w.strAlways(2, v)
	w.end(start)
}

func (w *wireWriter) objectReference(num protowire.Number, o *engine.ObjectReference) {
	start := w.begin(num)
	w.str(1, o.APIVersion)
	w.str(2, o.Kind)
	w.str(3, o.Name)
	w.end(start)
}

func (w *wireWriter) rules(num protowire.Number, r *engine.Rules) {
	start := w.begin(num)
	w.int32(1, r.StabilizationWindowSeconds)
	w.str(2, string(r.SelectPolicy))
	for i := range r.Policies {
		p := &r.Policies[i]
		ps := w.begin(3)
		w.str(1, string(p.Type))
		w.int32(2, p.Value)
		w.int32(3, p.PeriodSeconds)
		w.end(ps)
	}
	w.double(4, r.Tolerance)
	w.end(start)
}

// status writes a Status. With record, the conditions of the record's
// status, it is a LastDecision's Before: when one of its conditions
// equals one of record, its conditions are written as condition_refs
// (an index into record, or -1 for the next of the conditions written).
func (w *wireWriter) status(num protowire.Number, s *engine.Status, record []engine.Condition) {
	start := w.begin(num)
	w.int32(1, s.CurrentReplicas)
	w.int32(2, s.DesiredReplicas)
	w.time(3, s.LastScaleTime)
	for i := range s.CurrentMetrics {
		w.metricStatus(4, &s.CurrentMetrics[i])
	}
	var refsBuf [8]int32
	refs, shared := refsBuf[:0], false
	for i := range s.Conditions {
		c := &s.Conditions[i]
		r := slices.IndexFunc(record, func(rc engine.Condition) bool { return conditionEqual(rc, *c) })
		if r < 0 {
			w.condition(5, c)
		} else {
			shared = true
		}
		refs = append(refs, int32(r))
	}
	if shared {
		n := 0
		for _, r := range refs {
			n += protowire.SizeVarint(uint64(int64(r)))
		}
		w.tag(6, protowire.BytesType)
		w.varint(uint64(n))
		for _, r := range refs {
			w.varint(uint64(int64(r)))
		}
	}
	w.end(start)
}

func (w *wireWriter) condition(num protowire.Number, c *engine.Condition) {
	start := w.begin(num)
	w.str(1, string(c.Type))
	w.str(2, string(c.Status))
	w.str(3, c.Reason)
	w.str(4, c.Message)
	w.time(5, c.LastTransitionTime)
	w.end(start)
}

func (w *wireWriter) metricStatus(num protowire.Number, m *engine.MetricStatus) {
	start := w.begin(num)
	w.str(1, string(m.Type))
	w.str(2, m.Resource)
	w.str(3, m.Container)
	w.metricIdentifier(4, &m.Metric)
	w.objectReference(5, &m.DescribedObject)
	w.quantity(6, m.Value)
	w.quantity(7, m.AverageValue)
	if m.AverageUtilization != nil { // optional: present even when 0
		w.int64Always(8, int64(*m.AverageUtilization))
	}
	w.end(start)
}

func (w *wireWriter) quantity(num protowire.Number, q *engine.Quantity) {
	if q == nil {
		return
	}
	start := w.begin(num)
	w.int64(1, q.Milli)
	w.str(2, string(q.Format))
	w.end(start)
}

func (w *wireWriter) history(num protowire.Number, h *engine.History) {
	start := w.begin(num)
	for i := range h.Recommendations {
		r := &h.Recommendations[i]
		rs := w.begin(1)
		w.int32(1, r.Replicas)
		w.time(2, r.At)
		w.end(rs)
	}
	for i := range h.ScaleUpEvents {
		w.scaleEvent(2, &h.ScaleUpEvents[i])
	}
	for i := range h.ScaleDownEvents {
		w.scaleEvent(3, &h.ScaleDownEvents[i])
	}
	w.end(start)
}

func (w *wireWriter) scaleEvent(num protowire.Number, e *engine.ScaleEvent) {
	start := w.begin(num)
	w.int32(1, e.Change)
	w.time(2, e.At)
	w.bool(3, e.Outdated)
	w.end(start)
}

// decision writes a Decision; without its status when noStatus (the
// record's status stands for it).
func (w *wireWriter) decision(num protowire.Number, d *engine.Decision, noStatus bool) {
	start := w.begin(num)
	w.int32(1, d.DesiredReplicas)
	w.bool(2, d.Rescale)
	w.str(3, d.Error)
	if !noStatus {
		w.status(4, &d.Status, nil)
	}
	x := &d.Explanation
	xs := w.begin(5)
	w.int32(1, x.CurrentReplicas)
	for i := range x.Metrics {
		w.metricExplanation(2, &x.Metrics[i])
	}
	w.int64(3, int64(x.Winner))
	w.int32(4, x.Proposal)
	for i := range x.Steps {
		s := &x.Steps[i]
		ss := w.begin(5)
		w.str(1, string(s.Kind))
		w.int32(2, s.From)
		w.int32(3, s.To)
		w.str(4, s.Reason)
		w.str(5, s.Message)
		w.end(ss)
	}
	w.end(xs)
	w.history(6, &d.History)
	w.end(start)
}

func (w *wireWriter) metricExplanation(num protowire.Number, m *engine.MetricExplanation) {
	start := w.begin(num)
	w.str(1, m.Name)
	w.str(2, string(m.Outcome))
	w.int32(3, m.Proposal)
	w.str(4, m.Err)
	w.int64(5, m.Current)
	w.int64(6, m.Target)
	w.double(7, m.Ratio)
	w.double(8, m.RebalancedRatio)
	w.int32(9, m.ReadyPods)
	w.int32(10, m.UnreadyPods)
	w.int32(11, m.MissingPods)
	w.int32(12, m.IgnoredPods)
	w.end(start)
}
