package budget

import (
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Recommend and Observe are nearly every call the service gets: budgets
// checks them with their generated getters (typed), not by reflection
// (BenchmarkBudgetsRecommend: several times faster, allocating only in
// proto.Size of the spec), with the same violations at the same paths as
// the reflective walk, which checks every other request.
// TestTypedBudgetsMatchTheWalk compares both for an oversized value at
// every string, map and list of the two requests, so a field added to them
// must be added here too. The walks are written out: a helper taking the
// check of a list's entries as a function would move the walker, and its
// path, to the heap.

// typedCheck checks m with its typed walk and reports whether it has one.
func (w *walker) typedCheck(m any) bool {
	switch r := m.(type) {
	case *setpointv1.RecommendRequest:
		w.recommend(r)
	case *setpointv1.ObserveRequest:
		w.observe(r)
	default:
		return false
	}
	return true
}

// in pushes the step into field name, for a walk of a message field.
func (w *walker) in(name protoreflect.Name) { w.push(step{field: name, index: -1}) }

// entry pushes the step into entry i of the list at the path.
func (w *walker) entry(i int) { w.push(step{index: i}) }

func (w *walker) recommend(r *setpointv1.RecommendRequest) {
	if t := r.GetTarget(); t != nil {
		w.in("target")
		w.targetKey(t)
		w.pop()
	}
	if s := r.GetSpec(); s != nil {
		w.in("spec")
		w.spec(s)
		w.pop()
	}
	// settings has no string, map or list.
	if s := r.GetScale(); s != nil {
		w.in("scale")
		w.str(s.GetSelector(), ".selector")
		w.pop()
	}
	if pods := r.GetPods(); len(pods) > 0 {
		w.in("pods")
		for i, p := range pods { // bounded by requestLimits
			w.entry(i)
			w.pod(p)
			w.pop()
		}
		w.pop()
	}
	if rm := r.GetResourceMetrics(); rm != nil {
		w.in("resource_metrics")
		w.str(rm.GetError(), ".error")
		if items := rm.GetItems(); len(items) > 0 {
			w.in("items")
			for i, p := range items { // bounded by requestLimits
				w.entry(i)
				w.podMetrics(p)
				w.pop()
			}
			w.pop()
		}
		w.pop()
	}
	if obs := r.GetObservations(); len(obs) > 0 {
		w.in("observations")
		for i, o := range obs { // bounded by requestLimits
			w.entry(i)
			w.str(o.GetError(), ".error")
			if vs := o.GetValues(); len(vs) > 0 {
				w.in("values")
				for j, v := range vs { // bounded by requestLimits
					w.entry(j)
					w.metricValue(v)
					w.pop()
				}
				w.pop()
			}
			w.pop()
		}
		w.pop()
	}
}

func (w *walker) observe(r *setpointv1.ObserveRequest) {
	if t := r.GetTarget(); t != nil {
		w.in("target")
		w.targetKey(t)
		w.pop()
	}
	w.str(r.GetDecisionId(), "decision_id")
	if f := r.GetFailed(); f != nil {
		w.in("failed")
		w.str(f.GetMessage(), ".message")
		w.pop()
	}
	// applied and external have no string.
}

func (w *walker) targetKey(k *setpointv1.TargetKey) {
	w.str(k.GetCluster(), ".cluster")
	w.str(k.GetNamespace(), ".namespace")
	w.str(k.GetName(), ".name")
}

func (w *walker) objectRef(r *setpointv1.CrossVersionObjectReference) {
	w.str(r.GetApiVersion(), ".api_version")
	w.str(r.GetKind(), ".kind")
	w.str(r.GetName(), ".name")
}

func (w *walker) spec(s *setpointv1.HorizontalPodAutoscalerSpec) {
	if r := s.GetScaleTargetRef(); r != nil {
		w.in("scale_target_ref")
		w.objectRef(r)
		w.pop()
	}
	if ms := s.GetMetrics(); len(ms) > 0 {
		w.in("metrics")
		for i, m := range ms { // bounded by requestLimits
			w.entry(i)
			w.metricSpec(m)
			w.pop()
		}
		w.pop()
	}
	if b := s.GetBehavior(); b != nil {
		w.in("behavior")
		if r := b.GetScaleUp(); r != nil {
			w.in("scale_up")
			w.scalingRules(r)
			w.pop()
		}
		if r := b.GetScaleDown(); r != nil {
			w.in("scale_down")
			w.scalingRules(r)
			w.pop()
		}
		w.pop()
	}
	if f := s.GetFallback(); f != nil {
		w.in("fallback")
		w.str(f.GetBehavior(), ".behavior")
		w.pop()
	}
	if ws := s.GetSchedules(); len(ws) > 0 && w.list(len(ws), ".schedules") {
		w.in("schedules")
		for i, sw := range ws {
			w.entry(i)
			w.str(sw.GetName(), ".name")
			w.str(sw.GetTimeZone(), ".time_zone")
			w.str(sw.GetStart(), ".start")
			w.str(sw.GetEnd(), ".end")
			w.pop()
		}
		w.pop()
	}
}

func (w *walker) metricSpec(m *setpointv1.MetricSpec) {
	w.str(m.GetType(), ".type")
	if r := m.GetResource(); r != nil {
		w.in("resource")
		w.str(r.GetName(), ".name")
		w.metricTarget(r.GetTarget())
		w.pop()
	}
	if r := m.GetContainerResource(); r != nil {
		w.in("container_resource")
		w.str(r.GetName(), ".name")
		w.str(r.GetContainer(), ".container")
		w.metricTarget(r.GetTarget())
		w.pop()
	}
	if p := m.GetPods(); p != nil {
		w.in("pods")
		w.metricIdentifier(p.GetMetric())
		w.metricTarget(p.GetTarget())
		w.pop()
	}
	if o := m.GetObject(); o != nil {
		w.in("object")
		if r := o.GetDescribedObject(); r != nil {
			w.in("described_object")
			w.objectRef(r)
			w.pop()
		}
		w.metricIdentifier(o.GetMetric())
		w.metricTarget(o.GetTarget())
		w.pop()
	}
	if e := m.GetExternal(); e != nil {
		w.in("external")
		w.metricIdentifier(e.GetMetric())
		w.metricTarget(e.GetTarget())
		w.pop()
	}
}

// metricTarget checks t, the field target of the message at the path.
func (w *walker) metricTarget(t *setpointv1.MetricTarget) {
	if t == nil {
		return
	}
	w.in("target")
	w.str(t.GetType(), ".type")
	w.str(t.GetValue(), ".value")
	w.str(t.GetAverageValue(), ".average_value")
	w.pop()
}

// metricIdentifier checks m, the field metric of the message at the path.
func (w *walker) metricIdentifier(m *setpointv1.MetricIdentifier) {
	if m == nil {
		return
	}
	w.in("metric")
	w.str(m.GetName(), ".name")
	if s := m.GetSelector(); s != nil {
		w.in("selector")
		if ml := s.GetMatchLabels(); len(ml) > 0 {
			w.strMap(ml, ".match_labels")
		}
		if xs := s.GetMatchExpressions(); len(xs) > 0 && w.list(len(xs), ".match_expressions") {
			w.in("match_expressions")
			for i, x := range xs {
				w.entry(i)
				w.str(x.GetKey(), ".key")
				w.str(x.GetOperator(), ".operator")
				if vs := x.GetValues(); len(vs) > 0 && w.list(len(vs), ".values") {
					w.in("values")
					for j, v := range vs {
						if len(v) > w.MaxString {
							w.entry(j)
							w.str(v, "")
							w.pop()
						}
					}
					w.pop()
				}
				w.pop()
			}
			w.pop()
		}
		w.pop()
	}
	w.pop()
}

func (w *walker) scalingRules(r *setpointv1.ScalingRules) {
	w.str(r.GetSelectPolicy(), ".select_policy")
	if ps := r.GetPolicies(); len(ps) > 0 && w.list(len(ps), ".policies") {
		w.in("policies")
		for i, p := range ps {
			if len(p.GetType()) > w.MaxString {
				w.entry(i)
				w.str(p.GetType(), ".type")
				w.pop()
			}
		}
		w.pop()
	}
	w.str(r.GetTolerance(), ".tolerance")
}
