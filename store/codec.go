package store

// The codec stores a target.Record as its storage message,
// setpoint.storage.v1.Record (proto/setpoint/storage/v1/storage.proto):
// encodeRecord writes the message's bytes straight from the record
// (codec_wire.go); decodeRecord reads the record straight from them
// (codec_read.go), and leaves what it does not read as the generated
// message would to the generated message and its conversion (decoder).
// The encoder type converts engine values to messages for the change
// feed's entries (feed.go). Encoding fails on what could not be read back
// (a time outside the years 1–9999, a string that is not UTF-8); decoding
// fails on anything that is not a valid message, and never panics.

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/setpointhq/setpoint/engine"
	pb "github.com/setpointhq/setpoint/proto/setpoint/storage/v1"
	"github.com/setpointhq/setpoint/target"
)

// encodeRecord returns the stored form of rec. rec.Key is not part of it:
// the key is the bucket key.
func encodeRecord(rec *target.Record) ([]byte, error) {
	return encodeRecordThen(rec, compressValue, nil)
}

// encodeRecordThen is encodeRecord, compressing with compress
// (compressValue, or a way to run it) and calling then (when not nil)
// with the marshalled message before it is compressed; the bytes are
// valid only during the call. An error from then is returned.
func encodeRecordThen(rec *target.Record, compress func([]byte) []byte, then func(raw []byte) error) ([]byte, error) {
	buf := getScratch()
	b, err := appendRecord(*buf, rec)
	if err != nil {
		putScratch(buf, b)
		return nil, err
	}
	if then != nil {
		if err := then(b); err != nil {
			putScratch(buf, b)
			return nil, err
		}
	}
	out := compress(b)
	if len(out) > 0 && &out[0] == &b[0] { // stored as it is
		out = bytes.Clone(out)
	}
	putScratch(buf, b)
	return out, nil
}

// decodeRecord parses the stored form of the record of k. Any failure is a
// *CorruptError.
func decodeRecord(k target.Key, b []byte) (target.Record, error) {
	return decodeRecordFor(k, b, false)
}

// decodeRecordFor is decodeRecord, and with forDecision of the record's
// last decision only its ID and At (see Store.Decide): the rest of it, the
// largest part of a record, is neither unmarshalled nor checked.
func decodeRecordFor(k target.Key, b []byte, forDecision bool) (rec target.Record, err error) {
	defer func() {
		// The reader and the decoder below check every length and index
		// they use; this is the last line of the promise that bad bytes
		// never take the process down.
		if p := recover(); p != nil {
			rec, err = target.Record{}, &CorruptError{Key: k, Err: fmt.Errorf("panic while decoding: %v", p)}
		}
	}()
	raw, buf := b, getScratch()
	if b, err = decompressValueInto(*buf, raw); err != nil {
		return target.Record{}, &CorruptError{Key: k, Err: err}
	}
	if len(raw) > 0 && raw[0] == s2Value { // b is the scratch buffer's, or a new one
		defer putScratch(buf, b)
	}
	if rec, ok := readRecord(k, b, forDecision); ok {
		return rec, nil
	}
	return decodeMessage(k, b, forDecision)
}

// decodeMessage is decodeRecordFor for b, the decompressed message,
// through the generated message: the path for what readRecord leaves to
// it, and readRecord's oracle (FuzzWireReader).
func decodeMessage(k target.Key, b []byte, forDecision bool) (target.Record, error) {
	var m pb.Record
	var head *lastHead
	var err error
	if forDecision {
		head, err = unmarshalWithoutLast(b, &m)
	} else {
		err = proto.Unmarshal(b, &m)
	}
	if err != nil {
		return target.Record{}, &CorruptError{Key: k, Err: err}
	}
	return recordFromMessage(k, &m, head)
}

// recordFromMessage converts m, the storage message of the record of k, to
// the record; with head, of the last decision only head's ID and At (m
// then has no last decision). The record shares m's maps. Any failure is
// a *CorruptError.
func recordFromMessage(k target.Key, m *pb.Record, head *lastHead) (target.Record, error) {
	var d decoder
	rec := target.Record{
		Key:      k,
		Ref:      target.Ref{APIVersion: m.GetTargetRef().GetApiVersion(), Kind: m.GetTargetRef().GetKind(), Name: m.GetTargetRef().GetName()},
		Spec:     d.spec(m.GetSpec()),
		Settings: d.settings(m.GetSettings()),
		Status:   d.status(m.GetStatus()),
		History:  d.history(m.GetHistory()),
		Events:   mapSlice(m.GetEvents(), d.event),
		LastSeen: d.time(m.GetLastSeen()),
	}
	if head != nil {
		rec.Last = &target.LastDecision{ID: head.id, At: head.time(&d)}
	} else if l := m.GetLast(); l != nil {
		rec.Last = &target.LastDecision{ID: l.GetId(), At: d.time(l.GetAt()), Decision: d.decision(l.GetDecision()), Before: d.statusRefs(l.GetBefore(), m.GetStatus()), From: lastFrom(l)}
		if l.GetDecisionStatusIsRecordStatus() {
			rec.Last.Decision.Status = d.status(m.GetStatus()) // a copy of its own
		}
	}
	if d.err != nil {
		return target.Record{}, &CorruptError{Key: k, Err: d.err}
	}
	return rec, nil
}

// lastHead is what a decision reads of the previous one.
type lastHead struct {
	id    string
	at    timestamppb.Timestamp
	hasAt bool
}

// time is the decision's time, zero when it has none.
func (h *lastHead) time(d *decoder) time.Time {
	if !h.hasAt {
		return time.Time{}
	}
	return d.time(&h.at)
}

// recordLastField and the lastDecision…Field constants are the field
// numbers of Record.last, LastDecision.id and LastDecision.at.
const (
	recordLastField       protowire.Number = 6
	lastDecisionIDField   protowire.Number = 1
	lastDecisionTimeField protowire.Number = 2
)

// unmarshalWithoutLast unmarshals b, a stored Record, into m but for its
// last decision, of which it returns the ID and time. A record without a
// last decision, or whose last decision is not a single field (never
// written so), is unmarshalled whole, and the returned head is nil.
func unmarshalWithoutLast(b []byte, m *pb.Record) (*lastHead, error) {
	start, end := -1, -1
	for i := 0; i < len(b); {
		num, typ, n := protowire.ConsumeTag(b[i:])
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		v := protowire.ConsumeFieldValue(num, typ, b[i+n:])
		if v < 0 {
			return nil, protowire.ParseError(v)
		}
		if num == recordLastField {
			if start >= 0 || typ != protowire.BytesType {
				return nil, proto.Unmarshal(b, m)
			}
			start, end = i, i+n+v
		}
		i += n + v
	}
	if start < 0 {
		return nil, proto.Unmarshal(b, m)
	}
	if err := proto.Unmarshal(b[:start], m); err != nil {
		return nil, err
	}
	if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(b[end:], m); err != nil {
		return nil, err
	}
	_, _, n := protowire.ConsumeTag(b[start:])
	last, _ := protowire.ConsumeBytes(b[start+n:]) // its length was checked above
	head := &lastHead{}
	for len(last) > 0 {
		num, typ, n := protowire.ConsumeTag(last)
		if n < 0 {
			return nil, fmt.Errorf("last decision: %w", protowire.ParseError(n))
		}
		v := protowire.ConsumeFieldValue(num, typ, last[n:])
		if v < 0 {
			return nil, fmt.Errorf("last decision: %w", protowire.ParseError(v))
		}
		val := last[n : n+v]
		last = last[n+v:]
		if typ != protowire.BytesType || (num != lastDecisionIDField && num != lastDecisionTimeField) {
			continue
		}
		content, _ := protowire.ConsumeBytes(val)
		if num == lastDecisionIDField {
			if !utf8.Valid(content) {
				return nil, errors.New("last decision: id is not UTF-8")
			}
			head.id = string(content)
		} else if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(content, &head.at); err != nil {
			return nil, fmt.Errorf("last decision: at: %w", err)
		} else {
			head.hasAt = true
		}
	}
	return head, nil
}

// mapSlice converts each element of in with f; empty gives nil.
func mapSlice[In, Out any](in []In, f func(In) Out) []Out {
	if len(in) == 0 {
		return nil
	}
	out := make([]Out, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

// mapMessages converts each element of in with f into a message of one
// array: one allocation for the messages of a list instead of one each.
// Empty gives nil.
func mapMessages[In, Out any](in []In, f func(In, *Out)) []*Out {
	if len(in) == 0 {
		return nil
	}
	msgs, out := make([]Out, len(in)), make([]*Out, len(in))
	for i, v := range in {
		f(v, &msgs[i])
		out[i] = &msgs[i]
	}
	return out
}

// lastFrom is the replica count a stored decision started from. Records
// written before LastDecision.from was added hold the same count in the
// decision's explanation.
func lastFrom(l *pb.LastDecision) int32 {
	if l.From != nil {
		return l.GetFrom()
	}
	return l.GetDecision().GetExplanation().GetCurrentReplicas()
}

// encoder converts engine values to storage messages (the change feed's),
// keeping the first error.
type encoder struct {
	err error
	// stamps hands out the messages' timestamps (a decision holds dozens)
	// from chunks of stampChunk, one allocation each.
	stamps []timestamppb.Timestamp
}

// stampChunk is how many timestamps an encoder allocates at once.
const stampChunk = 16

// errTimeRange reports a time a Timestamp cannot hold.
var errTimeRange = errors.New("time outside the years 1 to 9999")

func (e *encoder) time(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	if len(e.stamps) == cap(e.stamps) {
		e.stamps = make([]timestamppb.Timestamp, 0, stampChunk)
	}
	e.stamps = e.stamps[:len(e.stamps)+1]
	ts := &e.stamps[len(e.stamps)-1] // as timestamppb.New(t) makes it
	ts.Seconds, ts.Nanos = t.Unix(), int32(t.Nanosecond())
	if err := ts.CheckValid(); err != nil && e.err == nil {
		e.err = fmt.Errorf("%w: %v", errTimeRange, t)
	}
	return ts
}

func (e *encoder) duration(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

func (e *encoder) event(v target.Event, m *pb.Event) {
	*m = pb.Event{Kind: string(v.Kind), From: v.From, To: v.To, At: e.time(v.At), DecisionId: v.DecisionID, Message: v.Message}
}

func (e *encoder) settings(v engine.Settings) *pb.Settings {
	return &pb.Settings{
		Tolerance:                    v.Tolerance,
		CpuInitializationPeriod:      e.duration(v.CPUInitializationPeriod),
		InitialReadinessDelay:        e.duration(v.InitialReadinessDelay),
		DownscaleStabilizationWindow: e.duration(v.DownscaleStabilizationWindow),
	}
}

func (e *encoder) spec(v engine.Spec) *pb.Spec {
	m := &pb.Spec{MinReplicas: v.MinReplicas, MaxReplicas: v.MaxReplicas, Metrics: mapSlice(v.Metrics, e.metricSpec)}
	if v.Behavior != nil {
		m.Behavior = &pb.Behavior{ScaleUp: e.rules(v.Behavior.ScaleUp), ScaleDown: e.rules(v.Behavior.ScaleDown)}
	}
	return m
}

func (e *encoder) metricSpec(v engine.MetricSpec) *pb.MetricSpec {
	return &pb.MetricSpec{
		Type:            string(v.Type),
		Resource:        v.Resource,
		Container:       v.Container,
		Metric:          e.metricIdentifier(v.Metric),
		DescribedObject: e.objectReference(v.DescribedObject),
		Target:          &pb.Target{Type: string(v.Target.Type), Milli: v.Target.Milli, Utilization: v.Target.Utilization},
	}
}

func (e *encoder) metricIdentifier(v engine.MetricIdentifier) *pb.MetricIdentifier {
	m := &pb.MetricIdentifier{Name: v.Name}
	if s := v.Selector; s != nil {
		m.Selector = &pb.LabelSelector{
			MatchLabels: s.MatchLabels,
			MatchExpressions: mapSlice(s.MatchExpressions, func(r engine.LabelSelectorRequirement) *pb.LabelSelectorRequirement {
				return &pb.LabelSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: r.Values}
			}),
		}
	}
	return m
}

func (e *encoder) objectReference(v engine.ObjectReference) *pb.ObjectReference {
	return &pb.ObjectReference{ApiVersion: v.APIVersion, Kind: v.Kind, Name: v.Name}
}

func (e *encoder) rules(v engine.Rules) *pb.Rules {
	return &pb.Rules{
		StabilizationWindowSeconds: v.StabilizationWindowSeconds,
		SelectPolicy:               string(v.SelectPolicy),
		Policies: mapMessages(v.Policies, func(p engine.Policy, m *pb.Policy) {
			*m = pb.Policy{Type: string(p.Type), Value: p.Value, PeriodSeconds: p.PeriodSeconds}
		}),
		Tolerance: v.Tolerance,
	}
}

func (e *encoder) status(v engine.Status) *pb.Status {
	return &pb.Status{
		CurrentReplicas: v.CurrentReplicas,
		DesiredReplicas: v.DesiredReplicas,
		LastScaleTime:   e.time(v.LastScaleTime),
		CurrentMetrics:  mapSlice(v.CurrentMetrics, e.metricStatus),
		Conditions: mapMessages(v.Conditions, func(c engine.Condition, m *pb.Condition) {
			*m = pb.Condition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason, Message: c.Message, LastTransitionTime: e.time(c.LastTransitionTime)}
		}),
	}
}

// statusEqual reports whether a and b are stored alike.
func statusEqual(a, b engine.Status) bool {
	return a.CurrentReplicas == b.CurrentReplicas && a.DesiredReplicas == b.DesiredReplicas &&
		a.LastScaleTime.Equal(b.LastScaleTime) &&
		slices.EqualFunc(a.Conditions, b.Conditions, conditionEqual) &&
		slices.EqualFunc(a.CurrentMetrics, b.CurrentMetrics, metricStatusEqual)
}

// metricStatusEqual reports whether a and b are stored alike: empty maps
// and slices are not stored, so they equal nil ones.
func metricStatusEqual(a, b engine.MetricStatus) bool {
	return a.Type == b.Type && a.Resource == b.Resource && a.Container == b.Container &&
		identifierEqual(a.Metric, b.Metric) && a.DescribedObject == b.DescribedObject &&
		pointeeEqual(a.Value, b.Value) && pointeeEqual(a.AverageValue, b.AverageValue) &&
		pointeeEqual(a.AverageUtilization, b.AverageUtilization)
}

// identifierEqual reports whether a and b are stored alike.
func identifierEqual(a, b engine.MetricIdentifier) bool {
	if a.Name != b.Name || (a.Selector == nil) != (b.Selector == nil) {
		return false
	}
	if a.Selector == nil {
		return true
	}
	return maps.Equal(a.Selector.MatchLabels, b.Selector.MatchLabels) &&
		slices.EqualFunc(a.Selector.MatchExpressions, b.Selector.MatchExpressions, func(x, y engine.LabelSelectorRequirement) bool {
			return x.Key == y.Key && x.Operator == y.Operator && slices.Equal(x.Values, y.Values)
		})
}

// pointeeEqual reports whether a and b are both nil or point to equal
// values.
func pointeeEqual[T comparable](a, b *T) bool {
	return a == b || (a != nil && b != nil && *a == *b)
}

// conditionEqual reports whether a and b are stored alike.
func conditionEqual(a, b engine.Condition) bool {
	return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message &&
		a.LastTransitionTime.Equal(b.LastTransitionTime)
}

func (e *encoder) metricStatus(v engine.MetricStatus) *pb.MetricStatus {
	return &pb.MetricStatus{
		Type:               string(v.Type),
		Resource:           v.Resource,
		Container:          v.Container,
		Metric:             e.metricIdentifier(v.Metric),
		DescribedObject:    e.objectReference(v.DescribedObject),
		Value:              e.quantity(v.Value),
		AverageValue:       e.quantity(v.AverageValue),
		AverageUtilization: v.AverageUtilization,
	}
}

func (e *encoder) quantity(v *engine.Quantity) *pb.Quantity {
	if v == nil {
		return nil
	}
	return &pb.Quantity{Milli: v.Milli, Format: string(v.Format)}
}

func (e *encoder) history(v engine.History) *pb.History {
	return &pb.History{
		Recommendations: mapMessages(v.Recommendations, func(r engine.Recommendation, m *pb.Recommendation) {
			*m = pb.Recommendation{Replicas: r.Replicas, At: e.time(r.At)}
		}),
		ScaleUpEvents:   mapMessages(v.ScaleUpEvents, e.scaleEvent),
		ScaleDownEvents: mapMessages(v.ScaleDownEvents, e.scaleEvent),
	}
}

func (e *encoder) scaleEvent(v engine.ScaleEvent, m *pb.ScaleEvent) {
	*m = pb.ScaleEvent{Change: v.Change, At: e.time(v.At), Outdated: v.Outdated}
}

func (e *encoder) decision(v engine.Decision) *pb.Decision {
	x := v.Explanation
	return &pb.Decision{
		DesiredReplicas: v.DesiredReplicas,
		Rescale:         v.Rescale,
		Error:           v.Error,
		Status:          e.status(v.Status),
		Explanation: &pb.Explanation{
			CurrentReplicas: x.CurrentReplicas,
			Metrics: mapMessages(x.Metrics, func(m engine.MetricExplanation, out *pb.MetricExplanation) {
				*out = pb.MetricExplanation{
					Name: m.Name, Outcome: string(m.Outcome), Proposal: m.Proposal, Err: m.Err,
					Current: m.Current, Target: m.Target, Ratio: m.Ratio, RebalancedRatio: m.RebalancedRatio,
					ReadyPods: m.ReadyPods, UnreadyPods: m.UnreadyPods, MissingPods: m.MissingPods, IgnoredPods: m.IgnoredPods,
				}
			}),
			Winner:   int64(x.Winner),
			Proposal: x.Proposal,
			Steps: mapMessages(x.Steps, func(s engine.Step, m *pb.Step) {
				*m = pb.Step{Kind: string(s.Kind), From: s.From, To: s.To, Reason: s.Reason, Message: s.Message}
			}),
		},
		History: e.history(v.History),
	}
}

// decoder converts storage messages to engine values, keeping the first
// error. Absent messages decode as zero values. The values share the
// messages' maps (slices and strings never are shared).
type decoder struct {
	err error
}

func (d *decoder) time(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	if err := ts.CheckValid(); err != nil {
		if d.err == nil {
			d.err = err
		}
		return time.Time{}
	}
	return ts.AsTime()
}

func (d *decoder) duration(v *durationpb.Duration) time.Duration {
	if v == nil {
		return 0
	}
	if err := v.CheckValid(); err != nil {
		if d.err == nil {
			d.err = err
		}
		return 0
	}
	return v.AsDuration()
}

func (d *decoder) event(m *pb.Event) target.Event {
	return target.Event{Kind: target.EventKind(m.GetKind()), From: m.GetFrom(), To: m.GetTo(), At: d.time(m.GetAt()), DecisionID: m.GetDecisionId(), Message: m.GetMessage()}
}

func (d *decoder) settings(m *pb.Settings) engine.Settings {
	return engine.Settings{
		Tolerance:                    m.GetTolerance(),
		CPUInitializationPeriod:      d.duration(m.GetCpuInitializationPeriod()),
		InitialReadinessDelay:        d.duration(m.GetInitialReadinessDelay()),
		DownscaleStabilizationWindow: d.duration(m.GetDownscaleStabilizationWindow()),
	}
}

func (d *decoder) spec(m *pb.Spec) engine.Spec {
	v := engine.Spec{MinReplicas: m.GetMinReplicas(), MaxReplicas: m.GetMaxReplicas(), Metrics: mapSlice(m.GetMetrics(), d.metricSpec)}
	if b := m.GetBehavior(); b != nil {
		v.Behavior = &engine.Behavior{ScaleUp: d.rules(b.GetScaleUp()), ScaleDown: d.rules(b.GetScaleDown())}
	}
	return v
}

func (d *decoder) metricSpec(m *pb.MetricSpec) engine.MetricSpec {
	t := m.GetTarget()
	return engine.MetricSpec{
		Type:            engine.MetricSourceType(m.GetType()),
		Resource:        m.GetResource(),
		Container:       m.GetContainer(),
		Metric:          d.metricIdentifier(m.GetMetric()),
		DescribedObject: d.objectReference(m.GetDescribedObject()),
		Target:          engine.Target{Type: engine.TargetType(t.GetType()), Milli: t.GetMilli(), Utilization: t.GetUtilization()},
	}
}

func (d *decoder) metricIdentifier(m *pb.MetricIdentifier) engine.MetricIdentifier {
	v := engine.MetricIdentifier{Name: m.GetName()}
	if s := m.GetSelector(); s != nil {
		v.Selector = &engine.LabelSelector{
			MatchExpressions: mapSlice(s.GetMatchExpressions(), func(r *pb.LabelSelectorRequirement) engine.LabelSelectorRequirement {
				return engine.LabelSelectorRequirement{Key: r.GetKey(), Operator: r.GetOperator(), Values: mapSlice(r.GetValues(), func(s string) string { return s })}
			}),
		}
		if len(s.GetMatchLabels()) > 0 {
			v.Selector.MatchLabels = s.GetMatchLabels()
		}
	}
	return v
}

func (d *decoder) objectReference(m *pb.ObjectReference) engine.ObjectReference {
	return engine.ObjectReference{APIVersion: m.GetApiVersion(), Kind: m.GetKind(), Name: m.GetName()}
}

func (d *decoder) rules(m *pb.Rules) engine.Rules {
	return engine.Rules{
		StabilizationWindowSeconds: m.GetStabilizationWindowSeconds(),
		SelectPolicy:               engine.SelectPolicy(m.GetSelectPolicy()),
		Policies: mapSlice(m.GetPolicies(), func(p *pb.Policy) engine.Policy {
			return engine.Policy{Type: engine.PolicyType(p.GetType()), Value: p.GetValue(), PeriodSeconds: p.GetPeriodSeconds()}
		}),
		Tolerance: m.GetTolerance(),
	}
}

func (d *decoder) status(m *pb.Status) engine.Status {
	return engine.Status{
		CurrentReplicas: m.GetCurrentReplicas(),
		DesiredReplicas: m.GetDesiredReplicas(),
		LastScaleTime:   d.time(m.GetLastScaleTime()),
		CurrentMetrics:  mapSlice(m.GetCurrentMetrics(), d.metricStatus),
		Conditions:      mapSlice(m.GetConditions(), d.condition),
	}
}

// errConditionRefs reports Status.condition_refs that do not match the
// conditions they refer to.
var errConditionRefs = errors.New("condition references out of range")

// statusRefs decodes target.LastDecision.Before, whose condition_refs refer to
// the conditions of record (the record's status).
func (d *decoder) statusRefs(m *pb.Status, record *pb.Status) engine.Status {
	v := d.status(m)
	refs := m.GetConditionRefs()
	if len(refs) == 0 {
		return v
	}
	recs := record.GetConditions()
	conds, err := conditionsFromRefs(refs, v.Conditions, len(recs), func(i int) engine.Condition { return d.condition(recs[i]) })
	if err != nil {
		if d.err == nil {
			d.err = err
		}
		return engine.Status{}
	}
	v.Conditions = conds
	return v
}

// conditionsFromRefs rebuilds the conditions of a status stored with
// condition_refs: own are the conditions stored in it, and record(i) is
// the i-th of the n conditions of the record's status. It fails with
// errConditionRefs when refs and own do not match.
func conditionsFromRefs(refs []int32, own []engine.Condition, n int, record func(i int) engine.Condition) ([]engine.Condition, error) {
	out := make([]engine.Condition, 0, len(refs))
	for _, r := range refs {
		switch {
		case r == -1 && len(own) > 0:
			out = append(out, own[0])
			own = own[1:]
		case r >= 0 && int(r) < n:
			out = append(out, record(int(r)))
		default:
			return nil, errConditionRefs
		}
	}
	if len(own) > 0 {
		return nil, errConditionRefs
	}
	return out, nil
}

func (d *decoder) condition(c *pb.Condition) engine.Condition {
	return engine.Condition{
		Type: engine.ConditionType(c.GetType()), Status: engine.ConditionStatus(c.GetStatus()),
		Reason: c.GetReason(), Message: c.GetMessage(), LastTransitionTime: d.time(c.GetLastTransitionTime()),
	}
}

func (d *decoder) metricStatus(m *pb.MetricStatus) engine.MetricStatus {
	v := engine.MetricStatus{
		Type:            engine.MetricSourceType(m.GetType()),
		Resource:        m.GetResource(),
		Container:       m.GetContainer(),
		Metric:          d.metricIdentifier(m.GetMetric()),
		DescribedObject: d.objectReference(m.GetDescribedObject()),
		Value:           d.quantity(m.GetValue()),
		AverageValue:    d.quantity(m.GetAverageValue()),
	}
	if m.AverageUtilization != nil {
		u := m.GetAverageUtilization()
		v.AverageUtilization = &u
	}
	return v
}

func (d *decoder) quantity(m *pb.Quantity) *engine.Quantity {
	if m == nil {
		return nil
	}
	return &engine.Quantity{Milli: m.GetMilli(), Format: engine.QuantityFormat(m.GetFormat())}
}

func (d *decoder) history(m *pb.History) engine.History {
	return engine.History{
		Recommendations: mapSlice(m.GetRecommendations(), func(r *pb.Recommendation) engine.Recommendation {
			return engine.Recommendation{Replicas: r.GetReplicas(), At: d.time(r.GetAt())}
		}),
		ScaleUpEvents:   mapSlice(m.GetScaleUpEvents(), d.scaleEvent),
		ScaleDownEvents: mapSlice(m.GetScaleDownEvents(), d.scaleEvent),
	}
}

func (d *decoder) scaleEvent(m *pb.ScaleEvent) engine.ScaleEvent {
	return engine.ScaleEvent{Change: m.GetChange(), At: d.time(m.GetAt()), Outdated: m.GetOutdated()}
}

func (d *decoder) decision(m *pb.Decision) engine.Decision {
	x := m.GetExplanation()
	return engine.Decision{
		DesiredReplicas: m.GetDesiredReplicas(),
		Rescale:         m.GetRescale(),
		Error:           m.GetError(),
		Status:          d.status(m.GetStatus()),
		Explanation: engine.Explanation{
			CurrentReplicas: x.GetCurrentReplicas(),
			Metrics: mapSlice(x.GetMetrics(), func(m *pb.MetricExplanation) engine.MetricExplanation {
				return engine.MetricExplanation{
					Name: m.GetName(), Outcome: engine.MetricOutcome(m.GetOutcome()), Proposal: m.GetProposal(), Err: m.GetErr(),
					Current: m.GetCurrent(), Target: m.GetTarget(), Ratio: m.GetRatio(), RebalancedRatio: m.GetRebalancedRatio(),
					ReadyPods: m.GetReadyPods(), UnreadyPods: m.GetUnreadyPods(), MissingPods: m.GetMissingPods(), IgnoredPods: m.GetIgnoredPods(),
				}
			}),
			Winner:   int(x.GetWinner()),
			Proposal: x.GetProposal(),
			Steps: mapSlice(x.GetSteps(), func(s *pb.Step) engine.Step {
				return engine.Step{Kind: engine.StepKind(s.GetKind()), From: s.GetFrom(), To: s.GetTo(), Reason: s.GetReason(), Message: s.GetMessage()}
			}),
		},
		History: d.history(m.GetHistory()),
	}
}

// MarshalRecord returns the storage message of rec as it is before
// compression: a sample for training the dictionary of stored values
// (values.dict).
func MarshalRecord(rec target.Record) ([]byte, error) {
	return appendRecord(nil, &rec)
}
