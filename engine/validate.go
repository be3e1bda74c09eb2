package engine

import (
	"fmt"
	"maps"
	"math"
	"slices"
)

// Limits of the autoscaling/v2 API that the engine relies on.
const (
	maxStabilizationWindowSeconds = 3600
	maxPolicyPeriodSeconds        = 1800
)

// Validate reports the first invalid field of in as a *FieldError; nil
// when Decide can decide on in.
func Validate(in Input) error {
	v := validator{}
	v.input(&in)
	return v.err
}

// validator collects the first field error.
type validator struct{ err error }

// check records a field error when ok is false and none was recorded.
func (v *validator) check(ok bool, field, format string, args ...any) {
	if !ok && v.err == nil {
		v.err = &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
}

func (v *validator) input(in *Input) {
	v.check(!in.Now.IsZero(), "now", "must be set")
	v.spec(&in.Spec)
	v.settings(&in.Settings)
	v.check(in.Scale.Replicas >= 0, "scale.replicas", "must be >= 0, got %d", in.Scale.Replicas)
	v.check(in.Scale.StatusReplicas >= 0, "scale.statusReplicas", "must be >= 0, got %d", in.Scale.StatusReplicas)
	names := make(map[string]bool, len(in.Pods))
	for i := range in.Pods {
		v.pod(fmt.Sprintf("pods[%d]", i), &in.Pods[i], names)
	}
	for i, p := range in.ResourceMetrics.Pods {
		f := fmt.Sprintf("resourceMetrics.pods[%d]", i)
		v.check(p.Pod != "", f+".pod", "must name a pod")
		v.check(p.Window >= 0, f+".window", "must be >= 0")
		for j, c := range p.Containers {
			v.quantities(fmt.Sprintf("%s.containers[%d].usage", f, j), c.Usage)
		}
	}
	v.check(len(in.Observations) == len(in.Spec.Metrics), "observations",
		"must have one entry per spec metric (%d), got %d", len(in.Spec.Metrics), len(in.Observations))
	for i := range in.Observations {
		if i >= len(in.Spec.Metrics) {
			break
		}
		obs := &in.Observations[i]
		f := fmt.Sprintf("observations[%d]", i)
		switch in.Spec.Metrics[i].Type {
		case PodsSource:
			for j, val := range obs.Values {
				v.check(val.Pod != "", fmt.Sprintf("%s.values[%d].pod", f, j), "must name a pod")
			}
		case ObjectSource:
			v.check(len(obs.Values) <= 1, f+".values", "an Object metric has at most one value, got %d", len(obs.Values))
		}
	}
	v.status(&in.Status)
}

func (v *validator) spec(s *Spec) {
	v.check(s.MinReplicas >= 0, "spec.minReplicas", "must be >= 0, got %d", s.MinReplicas)
	v.check(s.MaxReplicas >= 1, "spec.maxReplicas", "must be >= 1, got %d", s.MaxReplicas)
	v.check(s.MinReplicas <= s.MaxReplicas, "spec.minReplicas", "must be <= spec.maxReplicas (%d), got %d", s.MaxReplicas, s.MinReplicas)
	v.check(len(s.Metrics) > 0, "spec.metrics", "must have at least one metric")
	hasObjectOrExternal := false
	for i := range s.Metrics {
		m := &s.Metrics[i]
		v.metric(fmt.Sprintf("spec.metrics[%d]", i), m)
		if m.Type == ObjectSource || m.Type == ExternalSource {
			hasObjectOrExternal = true
		}
	}
	v.check(s.MinReplicas > 0 || hasObjectOrExternal || len(s.Metrics) == 0, "spec.minReplicas",
		"may be 0 only with at least one Object or External metric")
	if b := s.Behavior; b != nil {
		v.rules("spec.behavior.scaleUp", &b.ScaleUp)
		v.rules("spec.behavior.scaleDown", &b.ScaleDown)
	}
}

func (v *validator) metric(f string, m *MetricSpec) {
	allowed := map[MetricSourceType][]TargetType{
		ResourceSource:          {UtilizationTarget, AverageValueTarget},
		ContainerResourceSource: {UtilizationTarget, AverageValueTarget},
		PodsSource:              {AverageValueTarget},
		ObjectSource:            {ValueTarget, AverageValueTarget},
		ExternalSource:          {ValueTarget, AverageValueTarget},
	}
	types, known := allowed[m.Type]
	v.check(known, f+".type", "unknown metric source type %q", m.Type)
	if !known {
		return
	}
	switch m.Type {
	case ResourceSource, ContainerResourceSource:
		v.check(m.Resource != "", f+".resource", "must name a resource")
		v.check(m.Type == ResourceSource || m.Container != "", f+".container", "must name a container")
	default:
		v.check(m.Metric.Name != "", f+".metric.name", "must name a metric")
	}
	if m.Type == ObjectSource {
		v.check(m.DescribedObject.Kind != "", f+".describedObject.kind", "must be set")
		v.check(m.DescribedObject.Name != "", f+".describedObject.name", "must be set")
	}
	ok := false
	for _, t := range types {
		ok = ok || m.Target.Type == t
	}
	v.check(ok, f+".target.type", "%q is not allowed for a %s metric", m.Target.Type, m.Type)
	if m.Target.Type == UtilizationTarget {
		v.check(m.Target.Utilization > 0, f+".target.utilization", "must be > 0, got %d", m.Target.Utilization)
	} else {
		v.check(m.Target.Milli > 0, f+".target.milli", "must be > 0, got %d", m.Target.Milli)
	}
}

func (v *validator) rules(f string, r *Rules) {
	v.check(r.StabilizationWindowSeconds >= 0 && r.StabilizationWindowSeconds <= maxStabilizationWindowSeconds,
		f+".stabilizationWindowSeconds", "must be within [0, %d], got %d", maxStabilizationWindowSeconds, r.StabilizationWindowSeconds)
	switch r.SelectPolicy {
	case SelectMax, SelectMin, SelectDisabled:
	default:
		v.check(false, f+".selectPolicy", "unknown select policy %q", r.SelectPolicy)
	}
	v.check(len(r.Policies) > 0, f+".policies", "must have at least one policy")
	for i, p := range r.Policies {
		pf := fmt.Sprintf("%s.policies[%d]", f, i)
		v.check(p.Type == PodsPolicy || p.Type == PercentPolicy, pf+".type", "unknown policy type %q", p.Type)
		v.check(p.Value > 0, pf+".value", "must be > 0, got %d", p.Value)
		v.check(p.PeriodSeconds > 0 && p.PeriodSeconds <= maxPolicyPeriodSeconds, pf+".periodSeconds",
			"must be within [1, %d], got %d", maxPolicyPeriodSeconds, p.PeriodSeconds)
	}
	v.tolerance(f+".tolerance", r.Tolerance)
}

func (v *validator) tolerance(f string, t float64) {
	v.check(!math.IsNaN(t) && !math.IsInf(t, 0) && t >= 0, f, "must be a finite fraction >= 0, got %v", t)
}

func (v *validator) settings(s *Settings) {
	v.tolerance("settings.tolerance", s.Tolerance)
	v.check(s.CPUInitializationPeriod >= 0, "settings.cpuInitializationPeriod", "must be >= 0")
	v.check(s.InitialReadinessDelay >= 0, "settings.initialReadinessDelay", "must be >= 0")
	v.check(s.DownscaleStabilizationWindow >= 0, "settings.downscaleStabilizationWindow", "must be >= 0")
}

func (v *validator) pod(f string, p *Pod, names map[string]bool) {
	v.check(p.Name != "", f+".name", "must be set")
	v.check(!names[p.Name], f+".name", "duplicate pod name %q", p.Name)
	names[p.Name] = true
	switch p.Phase {
	case PodPending, PodRunning, PodSucceeded, PodFailed, PodUnknown:
	default:
		v.check(false, f+".phase", "unknown pod phase %q", p.Phase)
	}
	if p.Ready != nil {
		switch p.Ready.Status {
		case ConditionTrue, ConditionFalse, ConditionUnknown:
		default:
			v.check(false, f+".ready.status", "unknown condition status %q", p.Ready.Status)
		}
	}
	v.quantities(f+".requests", p.Requests)
	for i, c := range p.Containers {
		cf := fmt.Sprintf("%s.containers[%d]", f, i)
		v.check(c.Name != "", cf+".name", "must be set")
		v.quantities(cf+".requests", c.Requests)
	}
}

func (v *validator) quantities(f string, q map[string]int64) {
	// Sorted, so that the first error reported does not depend on map order.
	for _, name := range slices.Sorted(maps.Keys(q)) {
		v.check(name != "", f, "resource name must be set")
		v.check(q[name] >= 0, f+"["+name+"]", "must be >= 0, got %d", q[name])
	}
}

func (v *validator) status(s *Status) {
	v.check(s.DesiredReplicas >= 0, "status.desiredReplicas", "must be >= 0, got %d", s.DesiredReplicas)
	for i, c := range s.Conditions {
		v.check(c.Type != "", fmt.Sprintf("status.conditions[%d].type", i), "must be set")
	}
}
