package record

// Conversion between target.Record's values and the storage messages:
// the encoder and decoder types below. Encoding fails on what could not be
// read back (a time outside the years 1–9999, a string that is not UTF-8);
// decoding fails on the same, and on condition references out of range.

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/setpointhq/setpoint/engine"
	pb "github.com/setpointhq/setpoint/proto/setpoint/storage/v1"
	"github.com/setpointhq/setpoint/target"
)

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

// mapArray converts each element of in with f into a message of one
// array: one allocation for the messages of a list instead of one each.
// Empty gives nil.
func mapArray[In, Out any](in []In, f func(In, *Out)) []*Out {
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

// check keeps the first error a conversion meets.
type check struct {
	err error
}

// fail notes err unless an error was noted before.
func (c *check) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// errNotUTF8 reports a string a storage message cannot hold.
var errNotUTF8 = errors.New("string field is not valid UTF-8")

// s returns v, noting an error when v is not UTF-8 (protobuf's rule for
// string fields, which the generated code checks neither way).
func (c *check) s(v string) string {
	if c.err == nil && !utf8.ValidString(v) {
		c.err = errNotUTF8
	}
	return v
}

// encoder converts engine values to storage messages, keeping the first
// error. The messages it makes come from the storage messages' pools
// (pb.…FromVTPool; ResetVT keeps a list's messages) and its times and
// durations from arrays it keeps: a write that hands the tree back
// (ReturnToVTPool) and then the encoder (putEncoder) lets the next write
// reuse both instead of making a new tree.
type encoder struct {
	check
	times     slab[timestamppb.Timestamp]
	durations slab[durationpb.Duration]
}

// encoders keeps encoders, with their arrays of times and durations,
// between writes.
var encoders = sync.Pool{New: func() any { return new(encoder) }}

// getEncoder returns an encoder of encoders.
func getEncoder() *encoder { return encoders.Get().(*encoder) }

// putEncoder puts e back once no message it made is in use: the next
// encode overwrites its times and durations.
func putEncoder(e *encoder) {
	e.err = nil
	e.times.reset()
	e.durations.reset()
	encoders.Put(e)
}

// slab hands out values of one array, reused after reset. When the array
// is full a larger one replaces it; the values handed out before stay
// where they were, so a pointer stays valid until reset.
type slab[T any] struct{ vals []T }

// next returns a value of s, holding what it held when last handed out:
// the caller sets all of it.
func (s *slab[T]) next() *T {
	if len(s.vals) == cap(s.vals) {
		s.vals = make([]T, 0, max(16, 2*cap(s.vals)))
	}
	s.vals = s.vals[:len(s.vals)+1]
	return &s.vals[len(s.vals)-1]
}

// reset makes all of s's values free again.
func (s *slab[T]) reset() { s.vals = s.vals[:0] }

// fill converts each element of in with f into a message of out, a list
// of messages kept by its pool (ResetVT empties a list but keeps its
// messages, each reset), adding new messages where out has none. f sets
// the whole message.
func fill[In, Out any](out []*Out, in []In, f func(In, *Out)) []*Out {
	out = slices.Grow(out[:0], len(in))[:len(in)] // keeps the messages up to cap(out)
	for i, v := range in {
		if out[i] == nil {
			out[i] = new(Out)
		}
		f(v, out[i])
	}
	return out
}

// errTimeRange reports a time a Timestamp cannot hold.
var errTimeRange = errors.New("time outside the years 1 to 9999")

func (e *encoder) time(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	ts := e.times.next()
	ts.Seconds, ts.Nanos = t.Unix(), int32(t.Nanosecond()) // as timestamppb.New(t) sets them
	if ts.CheckValid() != nil {
		e.fail(fmt.Errorf("%w: %v", errTimeRange, t))
	}
	return ts
}

func (e *encoder) duration(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	v := e.durations.next()
	v.Seconds, v.Nanos = int64(d/time.Second), int32(d%time.Second) // as durationpb.New(d) sets them
	return v
}

func (e *encoder) event(v target.Event, m *pb.Event) {
	*m = pb.Event{Kind: e.s(string(v.Kind)), From: v.From, To: v.To, At: e.time(v.At), DecisionId: e.s(v.DecisionID), Message: e.s(v.Message)}
}

func (e *encoder) settings(v engine.Settings) *pb.Settings {
	m := pb.SettingsFromVTPool()
	*m = pb.Settings{
		Tolerance:                    v.Tolerance,
		CpuInitializationPeriod:      e.duration(v.CPUInitializationPeriod),
		InitialReadinessDelay:        e.duration(v.InitialReadinessDelay),
		DownscaleStabilizationWindow: e.duration(v.DownscaleStabilizationWindow),
	}
	return m
}

func (e *encoder) spec(v engine.Spec) *pb.Spec {
	m := pb.SpecFromVTPool()
	*m = pb.Spec{MinReplicas: v.MinReplicas, MaxReplicas: v.MaxReplicas, Metrics: fill(m.Metrics, v.Metrics, e.metricSpec)}
	if v.Behavior != nil {
		m.Behavior = pb.BehaviorFromVTPool()
		m.Behavior.ScaleUp, m.Behavior.ScaleDown = e.rules(v.Behavior.ScaleUp), e.rules(v.Behavior.ScaleDown)
	}
	return m
}

func (e *encoder) metricSpec(v engine.MetricSpec, m *pb.MetricSpec) {
	t := pb.TargetFromVTPool()
	*t = pb.Target{Type: e.s(string(v.Target.Type)), Milli: v.Target.Milli, Utilization: v.Target.Utilization}
	*m = pb.MetricSpec{
		Type:            e.s(string(v.Type)),
		Resource:        e.s(v.Resource),
		Container:       e.s(v.Container),
		Metric:          e.metricIdentifier(v.Metric),
		DescribedObject: e.objectReference(v.DescribedObject),
		Target:          t,
	}
}

func (e *encoder) metricIdentifier(v engine.MetricIdentifier) *pb.MetricIdentifier {
	m := pb.MetricIdentifierFromVTPool()
	m.Name = e.s(v.Name)
	if s := v.Selector; s != nil {
		for k, v := range s.MatchLabels {
			e.s(k)
			e.s(v)
		}
		sel := pb.LabelSelectorFromVTPool()
		*sel = pb.LabelSelector{
			MatchLabels: s.MatchLabels, // ResetVT lets go of a map, never clears it
			MatchExpressions: fill(sel.MatchExpressions, s.MatchExpressions, func(r engine.LabelSelectorRequirement, m *pb.LabelSelectorRequirement) {
				for _, v := range r.Values {
					e.s(v)
				}
				// A copy: ResetVT keeps the list for the next message.
				*m = pb.LabelSelectorRequirement{Key: e.s(r.Key), Operator: e.s(r.Operator), Values: append(m.Values[:0], r.Values...)}
			}),
		}
		m.Selector = sel
	}
	return m
}

func (e *encoder) objectReference(v engine.ObjectReference) *pb.ObjectReference {
	m := pb.ObjectReferenceFromVTPool()
	*m = pb.ObjectReference{ApiVersion: e.s(v.APIVersion), Kind: e.s(v.Kind), Name: e.s(v.Name)}
	return m
}

func (e *encoder) rules(v engine.Rules) *pb.Rules {
	m := pb.RulesFromVTPool()
	*m = pb.Rules{
		StabilizationWindowSeconds: v.StabilizationWindowSeconds,
		SelectPolicy:               e.s(string(v.SelectPolicy)),
		Policies: fill(m.Policies, v.Policies, func(p engine.Policy, m *pb.Policy) {
			*m = pb.Policy{Type: e.s(string(p.Type)), Value: p.Value, PeriodSeconds: p.PeriodSeconds}
		}),
		Tolerance: v.Tolerance,
	}
	return m
}

func (e *encoder) status(v engine.Status) *pb.Status {
	m := pb.StatusFromVTPool()
	*m = pb.Status{
		CurrentReplicas: v.CurrentReplicas,
		DesiredReplicas: v.DesiredReplicas,
		LastScaleTime:   e.time(v.LastScaleTime),
		CurrentMetrics:  fill(m.CurrentMetrics, v.CurrentMetrics, e.metricStatus),
		Conditions: fill(m.Conditions, v.Conditions, func(c engine.Condition, m *pb.Condition) {
			*m = pb.Condition{Type: e.s(string(c.Type)), Status: e.s(string(c.Status)), Reason: e.s(c.Reason), Message: e.s(c.Message), LastTransitionTime: e.time(c.LastTransitionTime)}
		}),
		ConditionRefs: m.ConditionRefs[:0], // for statusRefs
	}
	return m
}

// lastDecision is the message of l. With record, the record's status,
// (schema version 2) a decision status equal to it is left out
// (decision_status_is_record_status), and each of Before's conditions
// equal to one of its conditions is stored as a reference to it: the
// decision's status is the record's until an observation changes the
// latter, and the status before the decision shares most conditions with
// it.
func (e *encoder) lastDecision(l *target.LastDecision, record *engine.Status) *pb.LastDecision {
	d := l.Decision
	same := record != nil && statusEqual(d.Status, *record)
	if same {
		d.Status = engine.Status{}
	}
	var before *pb.Status
	if record != nil {
		before = e.statusRefs(l.Before, record.Conditions)
	} else {
		before = e.status(l.Before)
	}
	m := pb.LastDecisionFromVTPool()
	*m = pb.LastDecision{Id: e.s(l.ID), At: e.time(l.At), Decision: e.decision(d), Before: before, From: &l.From}
	if same {
		m.Decision.Status.ReturnToVTPool()
		m.Decision.Status = nil
		m.DecisionStatusIsRecordStatus = true
	}
	return m
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

func (e *encoder) metricStatus(v engine.MetricStatus, m *pb.MetricStatus) {
	*m = pb.MetricStatus{
		Type:               e.s(string(v.Type)),
		Resource:           e.s(v.Resource),
		Container:          e.s(v.Container),
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
	m := pb.QuantityFromVTPool()
	*m = pb.Quantity{Milli: v.Milli, Format: e.s(string(v.Format))}
	return m
}

func (e *encoder) history(v engine.History) *pb.History {
	m := pb.HistoryFromVTPool()
	*m = pb.History{
		Recommendations: fill(m.Recommendations, v.Recommendations, func(r engine.Recommendation, m *pb.Recommendation) {
			*m = pb.Recommendation{Replicas: r.Replicas, At: e.time(r.At)}
		}),
		ScaleUpEvents:   fill(m.ScaleUpEvents, v.ScaleUpEvents, e.scaleEvent),
		ScaleDownEvents: fill(m.ScaleDownEvents, v.ScaleDownEvents, e.scaleEvent),
	}
	return m
}

func (e *encoder) scaleEvent(v engine.ScaleEvent, m *pb.ScaleEvent) {
	*m = pb.ScaleEvent{Change: v.Change, At: e.time(v.At), Outdated: v.Outdated}
}

func (e *encoder) decision(v engine.Decision) *pb.Decision {
	x := v.Explanation
	xm := pb.ExplanationFromVTPool()
	*xm = pb.Explanation{
		CurrentReplicas: x.CurrentReplicas,
		Metrics: fill(xm.Metrics, x.Metrics, func(m engine.MetricExplanation, out *pb.MetricExplanation) {
			*out = pb.MetricExplanation{
				Name: e.s(m.Name), Outcome: e.s(string(m.Outcome)), Proposal: m.Proposal, Err: e.s(m.Err),
				Current: m.Current, Target: m.Target, Ratio: m.Ratio, RebalancedRatio: m.RebalancedRatio,
				ReadyPods: m.ReadyPods, UnreadyPods: m.UnreadyPods, MissingPods: m.MissingPods, IgnoredPods: m.IgnoredPods,
			}
		}),
		Winner:   int64(x.Winner),
		Proposal: x.Proposal,
		Steps: fill(xm.Steps, x.Steps, func(s engine.Step, m *pb.Step) {
			*m = pb.Step{Kind: e.s(string(s.Kind)), From: s.From, To: s.To, Reason: e.s(s.Reason), Message: e.s(s.Message)}
		}),
	}
	m := pb.DecisionFromVTPool()
	*m = pb.Decision{
		DesiredReplicas: v.DesiredReplicas,
		Rescale:         v.Rescale,
		Error:           e.s(v.Error),
		Status:          e.status(v.Status),
		Explanation:     xm,
		History:         e.history(v.History),
	}
	return m
}

// decoder converts storage messages to engine values, keeping the first
// error. Absent messages decode as zero values. The values share the
// messages' maps (slices and strings never are shared).
type decoder struct{ check }

func (d *decoder) time(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	if err := ts.CheckValid(); err != nil {
		d.fail(err)
		return time.Time{}
	}
	return ts.AsTime()
}

func (d *decoder) duration(v *durationpb.Duration) time.Duration {
	if v == nil {
		return 0
	}
	if err := v.CheckValid(); err != nil {
		d.fail(err)
		return 0
	}
	return v.AsDuration()
}

// lastDecision is the decision of m; record is the status of the record
// m was stored in (nil for a feed entry's), which m's status and Before's
// conditions may refer to.
func (d *decoder) lastDecision(m *pb.LastDecision, record *pb.Status) *target.LastDecision {
	l := &target.LastDecision{ID: d.s(m.GetId()), At: d.time(m.GetAt()), Decision: d.decision(m.GetDecision()), Before: d.statusRefs(m.GetBefore(), record), From: lastFrom(m)}
	if m.GetDecisionStatusIsRecordStatus() {
		l.Decision.Status = d.status(record) // a copy of its own
	}
	return l
}

func (d *decoder) event(m *pb.Event) target.Event {
	return target.Event{Kind: target.EventKind(d.s(m.GetKind())), From: m.GetFrom(), To: m.GetTo(), At: d.time(m.GetAt()), DecisionID: d.s(m.GetDecisionId()), Message: d.s(m.GetMessage())}
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
		Type:            engine.MetricSourceType(d.s(m.GetType())),
		Resource:        d.s(m.GetResource()),
		Container:       d.s(m.GetContainer()),
		Metric:          d.metricIdentifier(m.GetMetric()),
		DescribedObject: d.objectReference(m.GetDescribedObject()),
		Target:          engine.Target{Type: engine.TargetType(d.s(t.GetType())), Milli: t.GetMilli(), Utilization: t.GetUtilization()},
	}
}

func (d *decoder) metricIdentifier(m *pb.MetricIdentifier) engine.MetricIdentifier {
	v := engine.MetricIdentifier{Name: d.s(m.GetName())}
	if s := m.GetSelector(); s != nil {
		v.Selector = &engine.LabelSelector{
			MatchExpressions: mapSlice(s.GetMatchExpressions(), func(r *pb.LabelSelectorRequirement) engine.LabelSelectorRequirement {
				return engine.LabelSelectorRequirement{Key: d.s(r.GetKey()), Operator: d.s(r.GetOperator()), Values: mapSlice(r.GetValues(), d.s)}
			}),
		}
		for k, v := range s.GetMatchLabels() {
			d.s(k)
			d.s(v)
		}
		if len(s.GetMatchLabels()) > 0 {
			v.Selector.MatchLabels = s.GetMatchLabels()
		}
	}
	return v
}

func (d *decoder) objectReference(m *pb.ObjectReference) engine.ObjectReference {
	return engine.ObjectReference{APIVersion: d.s(m.GetApiVersion()), Kind: d.s(m.GetKind()), Name: d.s(m.GetName())}
}

func (d *decoder) rules(m *pb.Rules) engine.Rules {
	return engine.Rules{
		StabilizationWindowSeconds: m.GetStabilizationWindowSeconds(),
		SelectPolicy:               engine.SelectPolicy(d.s(m.GetSelectPolicy())),
		Policies: mapSlice(m.GetPolicies(), func(p *pb.Policy) engine.Policy {
			return engine.Policy{Type: engine.PolicyType(d.s(p.GetType())), Value: p.GetValue(), PeriodSeconds: p.GetPeriodSeconds()}
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
		d.fail(err)
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
		Type: engine.ConditionType(d.s(c.GetType())), Status: engine.ConditionStatus(d.s(c.GetStatus())),
		Reason: d.s(c.GetReason()), Message: d.s(c.GetMessage()), LastTransitionTime: d.time(c.GetLastTransitionTime()),
	}
}

func (d *decoder) metricStatus(m *pb.MetricStatus) engine.MetricStatus {
	v := engine.MetricStatus{
		Type:            engine.MetricSourceType(d.s(m.GetType())),
		Resource:        d.s(m.GetResource()),
		Container:       d.s(m.GetContainer()),
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
	return &engine.Quantity{Milli: m.GetMilli(), Format: engine.QuantityFormat(d.s(m.GetFormat()))}
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
		Error:           d.s(m.GetError()),
		Status:          d.status(m.GetStatus()),
		Explanation: engine.Explanation{
			CurrentReplicas: x.GetCurrentReplicas(),
			Metrics: mapSlice(x.GetMetrics(), func(m *pb.MetricExplanation) engine.MetricExplanation {
				return engine.MetricExplanation{
					Name: d.s(m.GetName()), Outcome: engine.MetricOutcome(d.s(m.GetOutcome())), Proposal: m.GetProposal(), Err: d.s(m.GetErr()),
					Current: m.GetCurrent(), Target: m.GetTarget(), Ratio: m.GetRatio(), RebalancedRatio: m.GetRebalancedRatio(),
					ReadyPods: m.GetReadyPods(), UnreadyPods: m.GetUnreadyPods(), MissingPods: m.GetMissingPods(), IgnoredPods: m.GetIgnoredPods(),
				}
			}),
			Winner:   int(x.GetWinner()),
			Proposal: x.GetProposal(),
			Steps: mapSlice(x.GetSteps(), func(s *pb.Step) engine.Step {
				return engine.Step{Kind: engine.StepKind(d.s(s.GetKind())), From: s.GetFrom(), To: s.GetTo(), Reason: d.s(s.GetReason()), Message: d.s(s.GetMessage())}
			}),
		},
		History: d.history(m.GetHistory()),
	}
}
