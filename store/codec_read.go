package store

// The record reader decodes a stored Record message straight from
// protobuf's wire format into target.Record with protowire, the mirror of
// the record encoder (codec_wire.go): no generated message is built and
// nothing is reflected on. For every message it decodes, the record is
// the one the generated path (decodeMessage: proto.Unmarshal, or
// unmarshalWithoutLast for a decision, then recordFromMessage) makes:
// fields in any order, unknown fields and known numbers of another wire
// type skipped, the last occurrence of a scalar field winning, repeated
// int32s packed or not, the last of a map's duplicated keys winning,
// times in UTC, empty lists and maps nil. What it does not decode so —
// bytes that do not parse, a string that is not UTF-8, a time or
// duration out of range, condition references out of range, a group, or
// a singular message field that occurs twice (which protobuf merges) —
// it leaves to the generated path, which decodes the message again and
// names the error. FuzzWireReader compares the two.

import (
	"math"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/target"
)

// readRecord decodes msg, a stored Record message (decompressed), into
// the record of k as decodeMessage does, with forDecision of the last
// decision only its ID and At; it reports false when it leaves msg to
// decodeMessage (see above).
func readRecord(k target.Key, msg []byte, forDecision bool) (target.Record, bool) {
	var r wireReader
	rec := target.Record{Key: k}
	r.record(msg, &rec, forDecision)
	if r.bad {
		return target.Record{}, false
	}
	return rec, true
}

// wireReader decodes storage messages into records. bad is set by what
// it leaves to the generated path; decoding then stops.
type wireReader struct {
	bad bool
	// strs are strings read, which str hands out again for equal bytes: a
	// record repeats its metrics' names, selectors and objects in its spec
	// and each of its statuses. A string's slot is a hash of its length
	// and three of its bytes (strSlot); a string read later takes it.
	strs [128]string
}

// strSlot is the slot of strs for the bytes v.
func strSlot(v []byte) int {
	h := uint64(len(v))
	if len(v) > 0 {
		h |= uint64(v[0])<<8 | uint64(v[len(v)/2])<<16 | uint64(v[len(v)-1])<<24
	}
	return int(h * 0x9e3779b97f4a7c15 >> (64 - 7)) // Fibonacci hashing into 128 slots
}

// fail sets r.bad and returns false.
func (r *wireReader) fail() bool {
	r.bad = true
	return false
}

// wireField is one field of a message: its number, wire type, and value (a
// varint or fixed-size value in x, a length-delimited one in v).
type wireField struct {
	num protowire.Number
	typ protowire.Type
	x   uint64
	v   []byte
}

// next consumes the next field of *b into f and reports whether there was
// one: false at the end of *b, after a failure, or on a field that does
// not parse, has a field number outside 1…2²⁹-1 (both fail), or is a
// group (left to the generated path: no storage message has one).
func (r *wireReader) next(b *[]byte, f *wireField) bool {
	p := *b
	if len(p) == 0 || r.bad {
		return false
	}
	tag, n := uint64(p[0]), 1
	if tag >= 0x80 {
		if tag, n = protowire.ConsumeVarint(p); n < 0 {
			return r.fail()
		}
	}
	if num := tag >> 3; num < uint64(protowire.MinValidNumber) || num > uint64(protowire.MaxValidNumber) {
		return r.fail()
	}
	f.num, f.typ = protowire.Number(tag>>3), protowire.Type(tag&7)
	p = p[n:]
	switch f.typ {
	case protowire.VarintType:
		if len(p) > 0 && p[0] < 0x80 {
			f.x, n = uint64(p[0]), 1
		} else {
			f.x, n = protowire.ConsumeVarint(p)
		}
	case protowire.BytesType:
		f.v, n = protowire.ConsumeBytes(p)
	case protowire.Fixed64Type:
		f.x, n = protowire.ConsumeFixed64(p)
	case protowire.Fixed32Type:
		var v uint32
		v, n = protowire.ConsumeFixed32(p)
		f.x = uint64(v)
	default:
		return r.fail()
	}
	if n < 0 {
		return r.fail()
	}
	*b = p[n:]
	return true
}

// counts returns how many length-delimited fields of each number below 8
// the message b holds: the lengths of its repeated message and string
// fields, and of its map, so that each is allocated once. Bytes that do
// not parse end the count (next fails on them).
func counts(b []byte) (c [8]int) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return c
		}
		b = b[n:]
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return c
		}
		b = b[n:]
		if typ == protowire.BytesType && num < 8 {
			c[num]++
		}
	}
	return c
}

// elem appends a zero element to *s, made with room for n when it is nil,
// and returns it.
func elem[T any](s *[]T, n int) *T {
	if *s == nil {
		*s = make([]T, 0, n)
	}
	var zero T
	*s = append(*s, zero)
	return &(*s)[len(*s)-1]
}

// int32 sets *v to an int32 field (protobuf truncates the varint).
func (f *wireField) int32(v *int32) {
	if f.typ == protowire.VarintType {
		*v = int32(f.x)
	}
}

// int64 sets *v to an int64 field.
func (f *wireField) int64(v *int64) {
	if f.typ == protowire.VarintType {
		*v = int64(f.x)
	}
}

// bool sets *v to a bool field: any varint but 0 is true.
func (f *wireField) bool(v *bool) {
	if f.typ == protowire.VarintType {
		*v = f.x != 0
	}
}

// double sets *v to a double field.
func (f *wireField) double(v *float64) {
	if f.typ == protowire.Fixed64Type {
		*v = math.Float64frombits(f.x)
	}
}

// str sets *s to a string field, which must be UTF-8 (proto3).
func (r *wireReader) str(f *wireField, s *string) {
	if f.typ == protowire.BytesType {
		r.text(f.v, s, false)
	}
}

// readWord is str for a field that holds the engine's vocabulary: a word
// of storedWords is not allocated.
func readWord[S ~string](r *wireReader, f *wireField, s *S) {
	if f.typ == protowire.BytesType {
		v := string(*s)
		r.text(f.v, &v, true)
		*s = S(v)
	}
}

// text sets *s to the UTF-8 string b: the one in b's slot of r.strs when
// it is equal, else (when word) the word of storedWords, else a new
// string, which then takes the slot.
func (r *wireReader) text(b []byte, s *string, word bool) {
	slot := &r.strs[strSlot(b)]
	if *slot != string(b) {
		if w, ok := storedWords[string(b)]; word && ok {
			*slot = w
		} else if utf8.Valid(b) {
			*slot = string(b)
		} else {
			r.fail()
			return
		}
	}
	*s = *slot
}

// storedWords are the strings stored records repeat most: the engine's
// vocabulary and Kubernetes' common names, each its own key and value.
var storedWords = func() map[string]string {
	words := []string{
		"apps/v1", "Deployment", "StatefulSet", "ReplicaSet", "cpu", "memory",
		"In", "NotIn", "Exists", "DoesNotExist",
		string(engine.ResourceSource), string(engine.ContainerResourceSource), string(engine.PodsSource),
		string(engine.ObjectSource), string(engine.ExternalSource),
		string(engine.UtilizationTarget), string(engine.ValueTarget), string(engine.AverageValueTarget),
		string(engine.SelectMax), string(engine.SelectMin), string(engine.SelectDisabled),
		string(engine.PodsPolicy), string(engine.PercentPolicy),
		string(engine.ConditionTrue), string(engine.ConditionFalse), string(engine.ConditionUnknown),
		string(engine.AbleToScale), string(engine.ScalingActive), string(engine.ScalingLimited), string(engine.ScaledToZero),
		string(engine.DecimalSI), string(engine.BinarySI),
		string(target.EventApplied), string(target.EventFailed), string(target.EventExternal),
		"ValidMetricFound", "ReadyForNewScale", "SucceededRescale", "SucceededGetScale", "FailedUpdateScale",
		"FailedGetResourceMetric", "FailedGetContainerResourceMetric", "FailedGetPodsMetric",
		"FailedGetObjectMetric", "FailedGetExternalMetric", "InvalidMetricSourceType", "InvalidSelector",
		"NotScaledToZero",
	}
	for _, table := range [][]string{outcomeCodes, stepKindCodes, reasonCodes} {
		words = append(words, table...)
	}
	m := make(map[string]string, len(words))
	for _, w := range words {
		m[w] = w
	}
	return m
}()

// once reports whether f is the occurrence of a singular message field to
// decode, recording it in *seen (a bit per field number). A second
// occurrence, which protobuf merges into the first, fails; a field of
// another wire type is unknown (false).
func (r *wireReader) once(f *wireField, seen *uint32) bool {
	if f.typ != protowire.BytesType {
		return false
	}
	bit := uint32(1) << (f.num & 31) // the storage messages' numbers are below 32
	if *seen&bit != 0 {
		return r.fail()
	}
	*seen |= bit
	return true
}

// seconds decodes a Timestamp's or a Duration's seconds and nanos.
func (r *wireReader) seconds(b []byte) (sec int64, nanos int32) {
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1:
			f.int64(&sec)
		case 2:
			f.int32(&nanos)
		}
	}
	return sec, nanos
}

// time sets *t to a Timestamp field, in UTC; a Timestamp outside the
// years 1–9999 fails (timestamppb's CheckValid).
func (r *wireReader) time(f *wireField, seen *uint32, t *time.Time) {
	if !r.once(f, seen) {
		return
	}
	sec, nanos := r.seconds(f.v)
	if sec < minTimestampSeconds || sec > maxTimestampSeconds || nanos < 0 || nanos >= 1e9 {
		r.fail()
		return
	}
	*t = time.Unix(sec, int64(nanos)).UTC()
}

// maxDurationSeconds is the largest Duration, in seconds: 10,000 years.
const maxDurationSeconds = 315576000000

// duration sets *d to a Duration field; one that durationpb's CheckValid
// refuses fails.
func (r *wireReader) duration(f *wireField, seen *uint32, d *time.Duration) {
	if !r.once(f, seen) {
		return
	}
	sec, nanos := r.seconds(f.v)
	if sec < -maxDurationSeconds || sec > maxDurationSeconds || nanos <= -1e9 || nanos >= 1e9 ||
		(sec > 0 && nanos < 0) || (sec < 0 && nanos > 0) {
		r.fail()
		return
	}
	v := durationpb.Duration{Seconds: sec, Nanos: nanos}
	*d = v.AsDuration()
}

// record decodes a Record into rec. The last decision is decoded after
// the rest, whose status its statuses refer to.
func (r *wireReader) record(b []byte, rec *target.Record, forDecision bool) {
	c := counts(b)
	var seen uint32
	var status, last []byte
	hasLast := false
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1:
			if r.once(&f, &seen) {
				r.targetRef(f.v, &rec.Ref)
			}
		case 2:
			if r.once(&f, &seen) {
				r.spec(f.v, &rec.Spec)
			}
		case 3:
			if r.once(&f, &seen) {
				r.settings(f.v, &rec.Settings)
			}
		case 4:
			if r.once(&f, &seen) {
				status = f.v
				r.status(f.v, &rec.Status, nil)
			}
		case 5:
			if r.once(&f, &seen) {
				r.history(f.v, &rec.History)
			}
		case recordLastField:
			if forDecision && f.typ != protowire.BytesType {
				r.fail() // unmarshalWithoutLast then decodes all of it
			}
			if r.once(&f, &seen) {
				last, hasLast = f.v, true
			}
		case 7:
			if f.typ == protowire.BytesType {
				r.event(f.v, elem(&rec.Events, c[7]))
			}
		case 8:
			r.time(&f, &seen, &rec.LastSeen)
		}
	}
	if !hasLast || r.bad {
		return
	}
	rec.Last = &target.LastDecision{}
	if forDecision {
		r.lastHead(last, rec.Last)
		return
	}
	r.last(last, rec.Last, status, rec.Status.Conditions)
}

// lastHead decodes of a LastDecision only its ID and At, as
// unmarshalWithoutLast does: the rest is only checked to parse.
func (r *wireReader) lastHead(b []byte, l *target.LastDecision) {
	var seen uint32
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case lastDecisionIDField:
			r.str(&f, &l.ID)
		case lastDecisionTimeField:
			r.time(&f, &seen, &l.At)
		}
	}
}

// last decodes a LastDecision of a record whose status is stored as
// status and decodes to conditions record (see recordFromMessage).
func (r *wireReader) last(b []byte, l *target.LastDecision, status []byte, record []engine.Condition) {
	var seen uint32
	var from int32
	hasFrom, same := false, false
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case lastDecisionIDField:
			r.str(&f, &l.ID)
		case lastDecisionTimeField:
			r.time(&f, &seen, &l.At)
		case 3:
			if r.once(&f, &seen) {
				r.decision(f.v, &l.Decision)
			}
		case 4:
			if r.once(&f, &seen) {
				r.before(f.v, &l.Before, record)
			}
		case 5:
			f.bool(&same)
		case 6:
			if f.typ == protowire.VarintType {
				from, hasFrom = int32(f.x), true
			}
		}
	}
	l.From = l.Decision.Explanation.CurrentReplicas // lastFrom
	if hasFrom {
		l.From = from
	}
	if same {
		l.Decision.Status = engine.Status{} // a copy of its own of the record's
		r.status(status, &l.Decision.Status, nil)
	}
}

// before decodes a LastDecision's Before, whose condition_refs refer to
// record, the record's conditions (decoder.statusRefs).
func (r *wireReader) before(b []byte, s *engine.Status, record []engine.Condition) {
	var refs []int32
	r.status(b, s, &refs)
	if len(refs) == 0 || r.bad {
		return
	}
	conds, err := conditionsFromRefs(refs, s.Conditions, len(record), func(i int) engine.Condition { return record[i] })
	if err != nil {
		r.fail()
		return
	}
	s.Conditions = conds
}

func (r *wireReader) targetRef(b []byte, t *target.Ref) {
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1:
			readWord(r, &f, &t.APIVersion)
		case 2:
			readWord(r, &f, &t.Kind)
		case 3:
			r.str(&f, &t.Name)
		}
	}
}

func (r *wireReader) event(b []byte, e *target.Event) {
	var seen uint32
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1:
			readWord(r, &f, &e.Kind)
		case 2:
			f.int32(&e.From)
		case 3:
			f.int32(&e.To)
		case 4:
			r.time(&f, &seen, &e.At)
		case 5:
			r.str(&f, &e.DecisionID)
		case 6:
			r.str(&f, &e.Message)
		}
	}
}

func (r *wireReader) settings(b []byte, s *engine.Settings) {
	var seen uint32
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1:
			f.double(&s.Tolerance)
		case 2:
			r.duration(&f, &seen, &s.CPUInitializationPeriod)
		case 3:
			r.duration(&f, &seen, &s.InitialReadinessDelay)
		case 4:
			r.duration(&f, &seen, &s.DownscaleStabilizationWindow)
		}
	}
}

func (r *wireReader) spec(b []byte, s *engine.Spec) {
	c := counts(b)
	var seen uint32
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1:
			f.int32(&s.MinReplicas)
		case 2:
			f.int32(&s.MaxReplicas)
		case 3:
			if f.typ == protowire.BytesType {
				r.metricSpec(f.v, elem(&s.Metrics, c[3]))
			}
		case 4:
			if r.once(&f, &seen) {
				s.Behavior = &engine.Behavior{}
				r.behavior(f.v, s.Behavior)
			}
		}
	}
}

func (r *wireReader) behavior(b []byte, v *engine.Behavior) {
	var seen uint32
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1:
			if r.once(&f, &seen) {
				r.rules(f.v, &v.ScaleUp)
			}
		case 2:
			if r.once(&f, &seen) {
				r.rules(f.v, &v.ScaleDown)
			}
		}
	}
}

func (r *wireReader) rules(b []byte, v *engine.Rules) {
	c := counts(b)
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1:
			f.int32(&v.StabilizationWindowSeconds)
		case 2:
			readWord(r, &f, &v.SelectPolicy)
		case 3:
			if f.typ == protowire.BytesType {
				r.policy(f.v, elem(&v.Policies, c[3]))
			}
		case 4:
			f.double(&v.Tolerance)
		}
	}
}

func (r *wireReader) policy(b []byte, p *engine.Policy) {
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1:
			readWord(r, &f, &p.Type)
		case 2:
			f.int32(&p.Value)
		case 3:
			f.int32(&p.PeriodSeconds)
		}
	}
}

func (r *wireReader) metricSpec(b []byte, m *engine.MetricSpec) {
	var seen uint32
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1, 2, 3, 4, 5:
			r.metricSource(&f, &seen, &m.Type, &m.Resource, &m.Container, &m.Metric, &m.DescribedObject)
		case 6:
			if r.once(&f, &seen) {
				r.target(f.v, &m.Target)
			}
		}
	}
}

// metricSource decodes f, one of the fields 1–5 that MetricSpec and
// MetricStatus share: type, resource, container, metric and described
// object.
func (r *wireReader) metricSource(f *wireField, seen *uint32, typ *engine.MetricSourceType, resource, container *string, metric *engine.MetricIdentifier, object *engine.ObjectReference) {
	switch f.num {
	case 1:
		readWord(r, f, typ)
	case 2:
		readWord(r, f, resource)
	case 3:
		r.str(f, container)
	case 4:
		if r.once(f, seen) {
			r.metricIdentifier(f.v, metric)
		}
	case 5:
		if r.once(f, seen) {
			r.objectReference(f.v, object)
		}
	}
}

func (r *wireReader) target(b []byte, t *engine.Target) {
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1:
			readWord(r, &f, &t.Type)
		case 2:
			f.int64(&t.Milli)
		case 3:
			f.int32(&t.Utilization)
		}
	}
}

func (r *wireReader) metricIdentifier(b []byte, m *engine.MetricIdentifier) {
	var seen uint32
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1:
			r.str(&f, &m.Name)
		case 2:
			if r.once(&f, &seen) {
				m.Selector = &engine.LabelSelector{}
				r.selector(f.v, m.Selector)
			}
		}
	}
}

// selector decodes a LabelSelector: its match_labels map is set only
// when it has an entry.
func (r *wireReader) selector(b []byte, s *engine.LabelSelector) {
	c := counts(b)
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1:
			if f.typ == protowire.BytesType {
				if s.MatchLabels == nil {
					s.MatchLabels = make(map[string]string, c[1])
				}
				k, v := r.mapEntry(f.v)
				s.MatchLabels[k] = v
			}
		case 2:
			if f.typ == protowire.BytesType {
				r.requirement(f.v, elem(&s.MatchExpressions, c[2]))
			}
		}
	}
}

// mapEntry decodes an entry of a map<string, string>: an absent key or
// value is empty.
func (r *wireReader) mapEntry(b []byte) (k, v string) {
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1:
			r.str(&f, &k)
		case 2:
			r.str(&f, &v)
		}
	}
	return k, v
}

func (r *wireReader) requirement(b []byte, q *engine.LabelSelectorRequirement) {
	c := counts(b)
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1:
			r.str(&f, &q.Key)
		case 2:
			readWord(r, &f, &q.Operator)
		case 3:
			if f.typ == protowire.BytesType {
				r.str(&f, elem(&q.Values, c[3]))
			}
		}
	}
}

func (r *wireReader) objectReference(b []byte, o *engine.ObjectReference) {
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1:
			readWord(r, &f, &o.APIVersion)
		case 2:
			readWord(r, &f, &o.Kind)
		case 3:
			r.str(&f, &o.Name)
		}
	}
}

// status decodes a Status into s; refs, when not nil, collects its
// condition_refs (a LastDecision's Before), which other statuses only
// check to parse.
func (r *wireReader) status(b []byte, s *engine.Status, refs *[]int32) {
	c := counts(b)
	var seen uint32
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1:
			f.int32(&s.CurrentReplicas)
		case 2:
			f.int32(&s.DesiredReplicas)
		case 3:
			r.time(&f, &seen, &s.LastScaleTime)
		case 4:
			if f.typ == protowire.BytesType {
				r.metricStatus(f.v, elem(&s.CurrentMetrics, c[4]))
			}
		case 5:
			if f.typ == protowire.BytesType {
				r.condition(f.v, elem(&s.Conditions, c[5]))
			}
		case 6:
			r.conditionRefs(&f, refs)
		}
	}
}

// conditionRefs appends a repeated int32 field to *refs (when refs is not
// nil), packed or not.
func (r *wireReader) conditionRefs(f *wireField, refs *[]int32) {
	switch f.typ {
	case protowire.VarintType:
		if refs != nil {
			*refs = append(*refs, int32(f.x))
		}
	case protowire.BytesType:
		for b := f.v; len(b) > 0; {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				r.fail()
				return
			}
			if refs != nil {
				*refs = append(*refs, int32(v))
			}
			b = b[n:]
		}
	}
}

func (r *wireReader) condition(b []byte, c *engine.Condition) {
	var seen uint32
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1:
			readWord(r, &f, &c.Type)
		case 2:
			readWord(r, &f, &c.Status)
		case 3:
			readWord(r, &f, &c.Reason)
		case 4:
			r.str(&f, &c.Message)
		case 5:
			r.time(&f, &seen, &c.LastTransitionTime)
		}
	}
}

func (r *wireReader) metricStatus(b []byte, m *engine.MetricStatus) {
	var seen uint32
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1, 2, 3, 4, 5:
			r.metricSource(&f, &seen, &m.Type, &m.Resource, &m.Container, &m.Metric, &m.DescribedObject)
		case 6:
			if r.once(&f, &seen) {
				m.Value = r.quantity(f.v)
			}
		case 7:
			if r.once(&f, &seen) {
				m.AverageValue = r.quantity(f.v)
			}
		case 8:
			if f.typ == protowire.VarintType {
				if m.AverageUtilization == nil {
					m.AverageUtilization = new(int32)
				}
				*m.AverageUtilization = int32(f.x)
			}
		}
	}
}

func (r *wireReader) quantity(b []byte) *engine.Quantity {
	q := &engine.Quantity{}
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1:
			f.int64(&q.Milli)
		case 2:
			readWord(r, &f, &q.Format)
		}
	}
	return q
}

func (r *wireReader) history(b []byte, h *engine.History) {
	c := counts(b)
	var f wireField
	for r.next(&b, &f) {
		if f.typ != protowire.BytesType {
			continue
		}
		switch f.num {
		case 1:
			r.recommendation(f.v, elem(&h.Recommendations, c[1]))
		case 2:
			r.scaleEvent(f.v, elem(&h.ScaleUpEvents, c[2]))
		case 3:
			r.scaleEvent(f.v, elem(&h.ScaleDownEvents, c[3]))
		}
	}
}

func (r *wireReader) recommendation(b []byte, v *engine.Recommendation) {
	var seen uint32
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1:
			f.int32(&v.Replicas)
		case 2:
			r.time(&f, &seen, &v.At)
		}
	}
}

func (r *wireReader) scaleEvent(b []byte, e *engine.ScaleEvent) {
	var seen uint32
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1:
			f.int32(&e.Change)
		case 2:
			r.time(&f, &seen, &e.At)
		case 3:
			f.bool(&e.Outdated)
		}
	}
}

func (r *wireReader) decision(b []byte, d *engine.Decision) {
	var seen uint32
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1:
			f.int32(&d.DesiredReplicas)
		case 2:
			f.bool(&d.Rescale)
		case 3:
			r.str(&f, &d.Error)
		case 4:
			if r.once(&f, &seen) {
				r.status(f.v, &d.Status, nil)
			}
		case 5:
			if r.once(&f, &seen) {
				r.explanation(f.v, &d.Explanation)
			}
		case 6:
			if r.once(&f, &seen) {
				r.history(f.v, &d.History)
			}
		}
	}
}

func (r *wireReader) explanation(b []byte, x *engine.Explanation) {
	c := counts(b)
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1:
			f.int32(&x.CurrentReplicas)
		case 2:
			if f.typ == protowire.BytesType {
				r.metricExplanation(f.v, elem(&x.Metrics, c[2]))
			}
		case 3:
			var w int64
			if f.typ == protowire.VarintType {
				f.int64(&w)
				x.Winner = int(w)
			}
		case 4:
			f.int32(&x.Proposal)
		case 5:
			if f.typ == protowire.BytesType {
				r.step(f.v, elem(&x.Steps, c[5]))
			}
		}
	}
}

func (r *wireReader) metricExplanation(b []byte, m *engine.MetricExplanation) {
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1:
			r.str(&f, &m.Name)
		case 2:
			readWord(r, &f, &m.Outcome)
		case 3:
			f.int32(&m.Proposal)
		case 4:
			r.str(&f, &m.Err)
		case 5:
			f.int64(&m.Current)
		case 6:
			f.int64(&m.Target)
		case 7:
			f.double(&m.Ratio)
		case 8:
			f.double(&m.RebalancedRatio)
		case 9:
			f.int32(&m.ReadyPods)
		case 10:
			f.int32(&m.UnreadyPods)
		case 11:
			f.int32(&m.MissingPods)
		case 12:
			f.int32(&m.IgnoredPods)
		}
	}
}

func (r *wireReader) step(b []byte, s *engine.Step) {
	var f wireField
	for r.next(&b, &f) {
		switch f.num {
		case 1:
			readWord(r, &f, &s.Kind)
		case 2:
			f.int32(&s.From)
		case 3:
			f.int32(&s.To)
		case 4:
			readWord(r, &f, &s.Reason)
		case 5:
			r.str(&f, &s.Message)
		}
	}
}
