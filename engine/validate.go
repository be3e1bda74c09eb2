package engine

import (
	"fmt"
	"math"
	"slices"
)

// Limits of the autoscaling/v2 API that the engine relies on; the server
// validates requests against the same constants.
const (
	// MaxStabilizationWindowSeconds is the longest stabilization window of
	// a behavior direction, in seconds (one hour).
	MaxStabilizationWindowSeconds = 3600
	// MaxPolicyPeriodSeconds is the longest period of a scaling policy, in
	// seconds (30 minutes).
	MaxPolicyPeriodSeconds = 1800
)

// Validate reports the first invalid field of in as a *FieldError; nil
// when Decide can decide on in.
func Validate(in Input) error {
	v := validator{}
	v.input(&in)
	return v.err
}

// validator collects the first field error, and the index of each pod in
// Input.Pods by name, which the decision reuses.
type validator struct {
	err  error
	pods podIndex
}

// fail records a field error unless one was recorded. Callers test the
// condition first, so that field paths are only built for invalid input.
func (v *validator) fail(field, format string, args ...any) {
	if v.err == nil {
		v.err = &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
}

func (v *validator) input(in *Input) {
	if in.Now.IsZero() {
		v.fail("now", "must be set")
	}
	v.spec(&in.Spec)
	v.settings(&in.Settings)
	if in.Scale.Replicas < 0 {
		v.fail("scale.replicas", "must be >= 0, got %d", in.Scale.Replicas)
	}
	if in.Scale.StatusReplicas < 0 {
		v.fail("scale.statusReplicas", "must be >= 0, got %d", in.Scale.StatusReplicas)
	}
	v.pods = newPodIndex(in.Pods)
	for i := range in.Pods {
		v.pod(i, &in.Pods[i])
	}
	for i := range in.ResourceMetrics.Pods {
		v.podUsage(i, &in.ResourceMetrics.Pods[i])
	}
	if len(in.Observations) != len(in.Spec.Metrics) {
		v.fail("observations", "must have one entry per spec metric (%d), got %d", len(in.Spec.Metrics), len(in.Observations))
	}
	for i := range in.Observations {
		if i >= len(in.Spec.Metrics) {
			break
		}
		obs := &in.Observations[i]
		switch in.Spec.Metrics[i].Type {
		case PodsSource:
			for j := range obs.Values {
				if obs.Values[j].Pod == "" {
					v.fail(fmt.Sprintf("observations[%d].values[%d].pod", i, j), "must name a pod")
				}
			}
		case ObjectSource:
			if len(obs.Values) > 1 {
				v.fail(fmt.Sprintf("observations[%d].values", i), "an Object metric has at most one value, got %d", len(obs.Values))
			}
		}
	}
	v.status(&in.Status)
	v.proposals(in.Proposals)
}

func (v *validator) spec(s *Spec) {
	if s.MinReplicas < 0 {
		v.fail("spec.minReplicas", "must be >= 0, got %d", s.MinReplicas)
	}
	if s.MaxReplicas < 1 {
		v.fail("spec.maxReplicas", "must be >= 1, got %d", s.MaxReplicas)
	}
	if s.MinReplicas > s.MaxReplicas {
		v.fail("spec.minReplicas", "must be <= spec.maxReplicas (%d), got %d", s.MaxReplicas, s.MinReplicas)
	}
	if len(s.Metrics) == 0 {
		v.fail("spec.metrics", "must have at least one metric")
	}
	hasObjectOrExternal := false
	for i := range s.Metrics {
		m := &s.Metrics[i]
		if !metricValid(m) {
			v.metric(fmt.Sprintf("spec.metrics[%d]", i), m)
		}
		if m.Type == ObjectSource || m.Type == ExternalSource {
			hasObjectOrExternal = true
		}
	}
	if !(s.MinReplicas > 0 || hasObjectOrExternal || len(s.Metrics) == 0) {
		v.fail("spec.minReplicas", "may be 0 only with at least one Object or External metric")
	}
	if b := s.Behavior; b != nil {
		v.rules("spec.behavior.scaleUp", &b.ScaleUp)
		v.rules("spec.behavior.scaleDown", &b.ScaleDown)
	}
}

// targetAllowed reports whether the metric source type s is known, and
// whether it accepts the target type t.
func targetAllowed(s MetricSourceType, t TargetType) (known, allowed bool) {
	switch s {
	case ResourceSource, ContainerResourceSource:
		return true, t == UtilizationTarget || t == AverageValueTarget
	case PodsSource:
		return true, t == AverageValueTarget
	case ObjectSource, ExternalSource:
		return true, t == ValueTarget || t == AverageValueTarget
	}
	return false, false
}

// metricValid reports whether metric m is valid; metric says why not.
func metricValid(m *MetricSpec) bool {
	var q validator
	q.metric("", m)
	return q.err == nil
}

func (v *validator) metric(f string, m *MetricSpec) {
	known, allowed := targetAllowed(m.Type, m.Target.Type)
	if !known {
		v.fail(f+".type", "unknown metric source type %q", m.Type)
		return
	}
	switch m.Type {
	case ResourceSource, ContainerResourceSource:
		if m.Resource == "" {
			v.fail(f+".resource", "must name a resource")
		}
		if !(m.Type == ResourceSource || m.Container != "") {
			v.fail(f+".container", "must name a container")
		}
	default:
		if m.Metric.Name == "" {
			v.fail(f+".metric.name", "must name a metric")
		}
	}
	if m.Type == ObjectSource {
		if m.DescribedObject.Kind == "" {
			v.fail(f+".describedObject.kind", "must be set")
		}
		if m.DescribedObject.Name == "" {
			v.fail(f+".describedObject.name", "must be set")
		}
	}
	if !allowed {
		v.fail(f+".target.type", "%q is not allowed for a %s metric", m.Target.Type, m.Type)
	}
	if m.Target.Type == UtilizationTarget {
		if m.Target.Utilization <= 0 {
			v.fail(f+".target.utilization", "must be > 0, got %d", m.Target.Utilization)
		}
	} else {
		if m.Target.Milli <= 0 {
			v.fail(f+".target.milli", "must be > 0, got %d", m.Target.Milli)
		}
	}
}

func (v *validator) rules(f string, r *Rules) {
	if !(r.StabilizationWindowSeconds >= 0 && r.StabilizationWindowSeconds <= MaxStabilizationWindowSeconds) {
		v.fail(f+".stabilizationWindowSeconds", "must be within [0, %d], got %d", MaxStabilizationWindowSeconds, r.StabilizationWindowSeconds)
	}
	switch r.SelectPolicy {
	case SelectMax, SelectMin, SelectDisabled:
	default:
		v.fail(f+".selectPolicy", "unknown select policy %q", r.SelectPolicy)
	}
	if len(r.Policies) == 0 {
		v.fail(f+".policies", "must have at least one policy")
	}
	for i, p := range r.Policies {
		pf := func() string { return fmt.Sprintf("%s.policies[%d]", f, i) }
		if !(p.Type == PodsPolicy || p.Type == PercentPolicy) {
			v.fail(pf()+".type", "unknown policy type %q", p.Type)
		}
		if p.Value <= 0 {
			v.fail(pf()+".value", "must be > 0, got %d", p.Value)
		}
		if !(p.PeriodSeconds > 0 && p.PeriodSeconds <= MaxPolicyPeriodSeconds) {
			v.fail(pf()+".periodSeconds", "must be within [1, %d], got %d", MaxPolicyPeriodSeconds, p.PeriodSeconds)
		}
	}
	if !toleranceValid(r.Tolerance) {
		v.tolerance(f+".tolerance", r.Tolerance)
	}
}

// toleranceValid reports whether t is a finite fraction >= 0.
func toleranceValid(t float64) bool { return !math.IsNaN(t) && !math.IsInf(t, 0) && t >= 0 }

func (v *validator) tolerance(f string, t float64) {
	if !toleranceValid(t) {
		v.fail(f, "must be a finite fraction >= 0, got %v", t)
	}
}

func (v *validator) settings(s *Settings) {
	v.tolerance("settings.tolerance", s.Tolerance)
	if s.CPUInitializationPeriod < 0 {
		v.fail("settings.cpuInitializationPeriod", "must be >= 0")
	}
	if s.InitialReadinessDelay < 0 {
		v.fail("settings.initialReadinessDelay", "must be >= 0")
	}
	if s.DownscaleStabilizationWindow < 0 {
		v.fail("settings.downscaleStabilizationWindow", "must be >= 0")
	}
}

// pod validates pods[i] and adds it to the index. Field paths are built
// only for a failure: a valid input of many pods costs no formatting.
func (v *validator) pod(i int, p *Pod) {
	if p.Name == "" {
		v.fail(fmt.Sprintf("pods[%d].name", i), "must be set")
	}
	if !v.pods.add(i) {
		v.fail(fmt.Sprintf("pods[%d].name", i), "duplicate pod name %q", p.Name)
	}
	switch p.Phase {
	case PodPending, PodRunning, PodSucceeded, PodFailed, PodUnknown:
	default:
		v.fail(fmt.Sprintf("pods[%d].phase", i), "unknown pod phase %q", p.Phase)
	}
	if p.Ready != nil {
		switch p.Ready.Status {
		case ConditionTrue, ConditionFalse, ConditionUnknown:
		default:
			v.fail(fmt.Sprintf("pods[%d].ready.status", i), "unknown condition status %q", p.Ready.Status)
		}
	}
	if !quantitiesValid(p.Requests) {
		v.quantities(fmt.Sprintf("pods[%d].requests", i), p.Requests)
	}
	if !quantitiesValid(p.Overhead) {
		v.quantities(fmt.Sprintf("pods[%d].overhead", i), p.Overhead)
	}
	for j := range p.Containers {
		c := &p.Containers[j]
		if c.Name == "" {
			v.fail(fmt.Sprintf("pods[%d].containers[%d].name", i, j), "must be set")
		}
		if !quantitiesValid(c.Requests) {
			v.quantities(fmt.Sprintf("pods[%d].containers[%d].requests", i, j), c.Requests)
		}
	}
}

// podUsage validates resourceMetrics.pods[i], p; field paths are built
// only for a failure.
func (v *validator) podUsage(i int, p *PodUsage) {
	if p.Pod == "" {
		v.fail(fmt.Sprintf("resourceMetrics.pods[%d].pod", i), "must name a pod")
	}
	if p.Window < 0 {
		v.fail(fmt.Sprintf("resourceMetrics.pods[%d].window", i), "must be >= 0")
	}
	for j := range p.Containers {
		if u := p.Containers[j].Usage; !quantitiesValid(u) {
			v.quantities(fmt.Sprintf("resourceMetrics.pods[%d].containers[%d].usage", i, j), u)
		}
	}
}

// quantities records the first invalid entry of the resource list q at
// field f: a name unset or named twice, an amount < 0.
func (v *validator) quantities(f string, q ResourceList) {
	for i, e := range q {
		switch {
		case e.Name == "":
			v.fail(f, "resource name must be set")
		case e.Milli < 0:
			v.fail(f+"["+e.Name+"]", "must be >= 0, got %d", e.Milli)
		case slices.ContainsFunc(q[:i], func(o ResourceQuantity) bool { return o.Name == e.Name }):
			v.fail(f+"["+e.Name+"]", "duplicate resource name")
		}
	}
}

func (v *validator) status(s *Status) {
	if s.DesiredReplicas < 0 {
		v.fail("status.desiredReplicas", "must be >= 0, got %d", s.DesiredReplicas)
	}
	for i, c := range s.Conditions {
		if c.Type == "" {
			v.fail(fmt.Sprintf("status.conditions[%d].type", i), "must be set")
		}
	}
}

// quantitiesValid reports whether every name of q is set and named once
// and every amount is >= 0. An empty list costs no call.
func quantitiesValid(q ResourceList) bool { return len(q) == 0 || listValid(q) }

// listValid is quantitiesValid for a list of one or more. Lists are short
// (cpu, memory, a few more), so names are compared pairwise up to a length
// where a set costs less.
func listValid(q ResourceList) bool {
	if len(q) == 1 { // a name alone cannot be a duplicate
		return q[0].Name != "" && q[0].Milli >= 0
	}
	for i := range q {
		if q[i].Name == "" || q[i].Milli < 0 {
			return false
		}
	}
	if len(q) > 16 {
		seen := make(map[string]struct{}, len(q))
		for i := range q {
			seen[q[i].Name] = struct{}{}
		}
		return len(seen) == len(q)
	}
	for i := 1; i < len(q); i++ {
		for j := range i {
			if q[i].Name == q[j].Name {
				return false
			}
		}
	}
	return true
}
