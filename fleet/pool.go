package fleet

import (
	"fmt"
	"math"
	"time"

	"github.com/setpointhq/setpoint/engine"
)

// Exclusion says why a member was left out of the pool; empty when it was
// pooled.
type Exclusion string

// The reasons a member is left out of the pool.
const (
	// ExcludedNoReport: the member has never reported.
	ExcludedNoReport Exclusion = "NoReport"
	// ExcludedStale: the member's latest report is older than StaleAfter.
	ExcludedStale Exclusion = "Stale"
	// ExcludedCannotScale: the member's agent reports it cannot scale.
	ExcludedCannotScale Exclusion = "CannotScale"
)

// PoolMember says what the pool made of one member.
type PoolMember struct {
	// Name names the member.
	Name string
	// Exclusion is why the member was left out; empty when pooled.
	Exclusion Exclusion
	// Age is how old the member's report was at the decision; 0 without a
	// report.
	Age time.Duration
	// Replicas is the member's current replica count, counted in the
	// fleet's only when pooled.
	Replicas int32
	// Pods is how many pods the member reported.
	Pods int
	// Message says the same in words.
	Message string
}

// Pooled is the members' reports made into one engine input.
type Pooled struct {
	// Input is the engine input over the pooled members: the base input's
	// spec, settings, namespace and proposals, and the members' scale,
	// pods and metrics combined.
	Input engine.Input
	// Members says, in spec order, what happened to each member.
	Members []PoolMember
	// Pooled is how many members were pooled.
	Pooled int
}

// exclusions lists each member's exclusion, in spec order.
func (p *Pooled) exclusions() []Exclusion {
	out := make([]Exclusion, len(p.Members))
	for i, m := range p.Members {
		out[i] = m.Exclusion
	}
	return out
}

// PodName is the name a member's pod has in the pool: the member's name,
// "/", the pod's name. Kubernetes pod names contain no "/", so pooled names
// never collide and the member is the part before the last "/".
func PodName(member, pod string) string { return member + "/" + pod }

// Pool makes one engine input of the members' latest reports at now, as if
// one autoscaler read every pooled member's pods and metrics:
//
//   - a member is pooled when its report is at most s.StaleAfter old and
//     does not say it cannot scale;
//   - the scale's replicas and status replicas are the pooled members'
//     sums, so members left out count for nothing (their pods are not in
//     the pool either);
//   - pods, resource metrics and Pods metrics are the union, every pod
//     renamed by PodName; a fetch error of any pooled member is the pool's
//     (the population the controller would average over is incomplete);
//   - Object and External metrics combine by s.Combine: Sum adds the
//     members' values (External series are concatenated, which the engine
//     sums), Shared takes the freshest member's answer.
//
// Utilization is then total usage over total requests, and missing or
// unready pods are rebalanced over the one population, by the engine
// itself. Pool is pure. It returns ErrInvalid for a report of an unknown
// member, a second report of a member, or a report whose observations do
// not match the spec's metrics.
func Pool(s Spec, base engine.Input, reports []Report, now time.Time) (Pooled, error) {
	byName := make(map[string]*Report, len(reports))
	known := make(map[string]bool, len(s.Members))
	for _, m := range s.Members {
		known[m.Name] = true
	}
	nm := len(base.Spec.Metrics)
	for i := range reports {
		r := &reports[i]
		switch {
		case !known[r.Member]:
			return Pooled{}, fmt.Errorf("%w: reports[%d].member: %q is not a member of the fleet", ErrInvalid, i, r.Member)
		case byName[r.Member] != nil:
			return Pooled{}, fmt.Errorf("%w: reports[%d].member: second report of %q", ErrInvalid, i, r.Member)
		case len(r.Observations) != nm:
			return Pooled{}, fmt.Errorf("%w: reports[%d].observations: %d for %d metrics", ErrInvalid, i, len(r.Observations), nm)
		case r.Scale.Replicas < 0 || r.Scale.StatusReplicas < 0:
			return Pooled{}, fmt.Errorf("%w: reports[%d].scale: replicas must be >= 0", ErrInvalid, i)
		}
		byName[r.Member] = r
	}

	in := base
	in.Pods, in.ResourceMetrics = nil, engine.ResourceMetrics{}
	in.Observations = make([]engine.Observation, nm)
	in.Scale = engine.Scale{}
	p := Pooled{Members: make([]PoolMember, len(s.Members))}
	var pooled []*Report
	var replicas, statusReplicas int64
	for i, m := range s.Members {
		pm := PoolMember{Name: m.Name}
		r := byName[m.Name]
		switch {
		case r == nil:
			pm.Exclusion, pm.Message = ExcludedNoReport, "no report yet"
		default:
			pm.Age, pm.Replicas, pm.Pods = now.Sub(r.At), r.Scale.Replicas, len(r.Pods)
			switch {
			case pm.Age > s.StaleAfter:
				pm.Exclusion = ExcludedStale
				pm.Message = fmt.Sprintf("report %v old, older than %v: left out, its %d replicas not counted", pm.Age, s.StaleAfter, pm.Replicas)
			case r.CannotScale != "":
				pm.Exclusion = ExcludedCannotScale
				pm.Message = fmt.Sprintf("cannot scale (%s): left out, its %d replicas not counted", r.CannotScale, pm.Replicas)
			default:
				pm.Message = fmt.Sprintf("pooled: %d replicas, %d pods, report %v old", pm.Replicas, pm.Pods, pm.Age)
				pooled = append(pooled, r)
				replicas += int64(r.Scale.Replicas)
				statusReplicas += int64(r.Scale.StatusReplicas)
			}
		}
		p.Members[i] = pm
	}
	p.Pooled = len(pooled)
	in.Scale.Replicas, in.Scale.StatusReplicas = saturate32(replicas), saturate32(statusReplicas)
	if len(pooled) == 0 {
		p.Input = in
		return p, nil
	}
	// Members of one workload share its selector; the pool shows the first
	// member's, has none when a member has none, and carries the first
	// member's parse error.
	in.Scale.Selector = pooled[0].Scale.Selector
	for _, r := range pooled {
		if r.Scale.Selector == "" {
			in.Scale.Selector = ""
		}
		if r.Scale.SelectorError != "" && in.Scale.SelectorError == "" {
			in.Scale.SelectorError = "member " + r.Member + ": " + r.Scale.SelectorError
		}
	}

	var nPods, nUsage int
	for _, r := range pooled {
		nPods, nUsage = nPods+len(r.Pods), nUsage+len(r.ResourceMetrics.Pods)
	}
	in.Pods = make([]engine.Pod, 0, nPods)
	in.ResourceMetrics.Pods = make([]engine.PodUsage, 0, nUsage)
	for _, r := range pooled {
		for _, pod := range r.Pods {
			pod.Name = PodName(r.Member, pod.Name)
			in.Pods = append(in.Pods, pod)
		}
		rm := &in.ResourceMetrics
		if r.ResourceMetrics.Err != "" && rm.Err == "" {
			rm.Err = "member " + r.Member + ": " + r.ResourceMetrics.Err
		}
		for _, u := range r.ResourceMetrics.Pods {
			u.Pod = PodName(r.Member, u.Pod)
			rm.Pods = append(rm.Pods, u)
		}
	}
	for j := range base.Spec.Metrics {
		in.Observations[j] = combine(base.Spec.Metrics[j].Type, s.combineOf(j), pooled, j)
	}
	p.Input = in
	return p, nil
}

// combineOf is metric j's combination rule.
func (s *Spec) combineOf(j int) Combine {
	if j < len(s.Combine) && s.Combine[j] != "" {
		return s.Combine[j]
	}
	return CombineSum
}

// combine makes the pool's observation of metric j from the pooled
// members' observations.
func combine(t engine.MetricSourceType, c Combine, pooled []*Report, j int) engine.Observation {
	var out engine.Observation
	switch {
	case t == engine.ResourceSource || t == engine.ContainerResourceSource:
		// Only Err is read, and resource metrics come from ResourceMetrics.
		for _, r := range pooled {
			if e := r.Observations[j].Err; e != "" {
				return engine.Observation{Err: "member " + r.Member + ": " + e}
			}
		}
	case t == engine.PodsSource:
		n := 0
		for _, r := range pooled {
			n += len(r.Observations[j].Values)
		}
		out.Values = make([]engine.MetricValue, 0, n)
		for _, r := range pooled {
			o := r.Observations[j]
			if o.Err != "" {
				return engine.Observation{Err: "member " + r.Member + ": " + o.Err}
			}
			for _, v := range o.Values {
				v.Pod = PodName(r.Member, v.Pod)
				out.Values = append(out.Values, v)
			}
		}
	case c == CombineShared:
		return freshest(pooled, j)
	case t == engine.ExternalSource:
		for _, r := range pooled {
			o := r.Observations[j]
			if o.Err != "" {
				return engine.Observation{Err: "member " + r.Member + ": " + o.Err}
			}
			out.Values = append(out.Values, o.Values...)
		}
	case t == engine.ObjectSource:
		return sumObject(pooled, j)
	}
	return out
}

// sumObject adds the members' values of Object metric j: one value, the
// sum (saturated at the int64 limits), stamped with the newest member's
// time. A member that failed, or that answered nothing while others
// answered, fails the metric: the total would be wrong.
func sumObject(pooled []*Report, j int) engine.Observation {
	var sum engine.MetricValue
	answered := 0
	for _, r := range pooled {
		o := r.Observations[j]
		if o.Err != "" {
			return engine.Observation{Err: "member " + r.Member + ": " + o.Err}
		}
		if len(o.Values) > 0 {
			answered++
			v := o.Values[0]
			sum.Milli = addSaturated(sum.Milli, v.Milli)
			if v.Timestamp.After(sum.Timestamp) {
				sum.Timestamp = v.Timestamp
			}
		}
	}
	switch answered {
	case 0:
		return engine.Observation{} // no member answered: as one cluster with no value
	case len(pooled):
		return engine.Observation{Values: []engine.MetricValue{sum}}
	}
	for _, r := range pooled {
		if len(r.Observations[j].Values) == 0 {
			return engine.Observation{Err: "member " + r.Member + ": no value returned, so the fleet's total is unknown"}
		}
	}
	panic("unreachable")
}

// freshest is the answer of the member whose newest value is the newest
// (the first such member in spec order on a tie); the first member's
// error when no member answered with values.
func freshest(pooled []*Report, j int) engine.Observation {
	best, bestAt := -1, time.Time{}
	var firstErr *engine.Observation
	for i, r := range pooled {
		o := r.Observations[j]
		if o.Err != "" {
			if firstErr == nil {
				firstErr = &engine.Observation{Err: "member " + r.Member + ": " + o.Err}
			}
			continue
		}
		for _, v := range o.Values {
			if best < 0 || v.Timestamp.After(bestAt) {
				best, bestAt = i, v.Timestamp
			}
		}
	}
	switch {
	case best >= 0:
		return pooled[best].Observations[j]
	case firstErr != nil:
		return *firstErr
	}
	return engine.Observation{}
}

// addSaturated is a+b, held at the int64 limits instead of wrapping.
func addSaturated(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// saturate32 is n held at the int32 maximum.
func saturate32(n int64) int32 {
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(n)
}
