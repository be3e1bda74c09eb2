package engine

import (
	"fmt"
	"strconv"
	"time"
)

// decider carries one decision's working state.
type decider struct {
	// in and pods are held by value: behind pointers, the compiler would
	// move the caller's copies to the heap on every decision.
	in      Input
	pods    podIndex // finds the pods of in.Pods by name
	now     time.Time
	status  Status // the status being built, starting from in.Status
	hist    History
	explain Explanation
	out     *outputs
}

// outputs holds, in one allocation, what a decision returns apart from its
// history and strings: the status' conditions, the explanation's steps,
// and for up to blockMetrics metrics their statuses, explanations and
// values. A decision keeps them in the block while they fit.
type outputs struct {
	conditions [conditionTypes]Condition
	steps      [maxSteps]Step
	statuses   [blockMetrics]MetricStatus
	explains   [blockMetrics]MetricExplanation
	values     [blockMetrics]metricValues
}

// maxSteps is the most steps a decision takes: stabilization, a limit
// and the rise from zero to the minimum.
const maxSteps = 3

// blockMetrics is the number of metrics whose outputs fit in the
// decision's block: most autoscalers have one or two.
const blockMetrics = 2

// decide is Decide for validated input, whose pods are at the indices of
// pods by name; it mirrors upstream's reconcileAutoscaler from the point
// where the scale has been read.
func decide(in Input, h History, pods podIndex) Decision {
	out := new(outputs)
	d := &decider{
		in:      in,
		pods:    pods,
		now:     in.Now,
		status:  startStatus(in.Status, out),
		hist:    startHistory(h),
		explain: Explanation{CurrentReplicas: in.Scale.Replicas, Winner: -1, Proposal: in.Scale.Replicas},
		out:     out,
	}
	return d.run()
}

func (d *decider) run() Decision {
	in := &d.in
	spec := &in.Spec
	d.setCondition(AbleToScale, ConditionTrue, "SucceededGetScale", "the HPA controller was able to get the target's current scale")
	current := in.Scale.Replicas
	if d.hist.Recommendations == nil {
		// Upstream seeds a new target's history with its current count when
		// the scale has been read, a moment before it normalizes; the
		// nanosecond keeps that order, which decides whether the seed falls
		// inside a zero-length window.
		d.hist.Recommendations = []Recommendation{{Replicas: current, At: d.now.Add(-time.Nanosecond)}}
	}
	minReplicas := spec.MinReplicas
	hasObjectOrExternal := false
	for _, m := range spec.Metrics {
		if m.Type == ObjectSource || m.Type == ExternalSource {
			hasObjectOrExternal = true
		}
	}
	scaledToZero := false
	for _, c := range in.Status.Conditions {
		if c.Type == ScaledToZero {
			scaledToZero = c.Status == ConditionTrue
			break
		}
	}

	var desired int32
	rescale := true
	needsMetrics := true
	var metricStatuses []MetricStatus
	var reconcileErr string
	switch {
	case current == 0:
		if !((minReplicas != 0 && scaledToZero) || (scaledToZero && hasObjectOrExternal)) {
			needsMetrics, rescale = false, false
			d.setCondition(ScalingActive, ConditionFalse, "ScalingDisabled", "scaling is disabled since the replica count of the target is zero")
			d.step(StepScalingDisabled, 0, 0, "ScalingDisabled", "the target has no replicas and was not scaled to zero by the autoscaler")
		}
	case current > spec.MaxReplicas:
		desired, needsMetrics = spec.MaxReplicas, false
		d.step(StepAboveMax, current, desired, "TooManyReplicas", "current number of replicas above spec.maxReplicas; metrics not evaluated")
	case current < minReplicas:
		desired, needsMetrics = minReplicas, false
		d.step(StepBelowMin, current, desired, "TooFewReplicas", "current number of replicas below spec.minReplicas; metrics not evaluated")
	}

	if needsMetrics {
		proposal, statuses, errText, failed := d.computeMetrics()
		metricStatuses = statuses
		recovered := false
		if failed {
			if p, ok := d.fallbackRecovery(); ok {
				proposal, failed, recovered = p, false, true
			}
		}
		if failed {
			if d.hasCondition(FallbackActive) {
				d.setCondition(FallbackActive, ConditionFalse, "NoFallback", "the metrics failed and no fallback was given")
			}
			d.status.CurrentReplicas = current
			d.status.CurrentMetrics = statuses
			return Decision{
				DesiredReplicas: d.status.DesiredReplicas,
				Error:           "failed to compute desired number of replicas based on listed metrics: " + errText,
				Status:          d.status,
				Explanation:     d.explain,
				History:         d.hist,
			}
		}
		reconcileErr = errText
		if proposal > desired {
			desired = proposal
		}
		d.explain.Proposal = desired
		if len(in.Proposals) > 0 || d.hasCondition(FallbackActive) {
			desired = d.mergeProposals(desired, recovered, errText != "")
		}
		if spec.Behavior == nil {
			desired = d.normalizeLegacy(current, desired)
		} else {
			desired = d.normalizeWithBehavior(current, desired)
		}
		if current == 0 && minReplicas != 0 && scaledToZero && desired < minReplicas {
			d.step(StepMinFromZero, desired, minReplicas, "TooFewReplicas", "scaling from zero raises the count to spec.minReplicas")
			desired = minReplicas
		}
		rescale = desired != current
	}

	if rescale {
		d.setCondition(AbleToScale, ConditionTrue, "SucceededRescale", rescaleMessage(desired))
		if current > 0 && desired == 0 && minReplicas == 0 && hasObjectOrExternal {
			d.setCondition(ScaledToZero, ConditionTrue, "ScaledToZero", "the HPA controller scaled the workload to zero")
		} else {
			d.setCondition(ScaledToZero, ConditionFalse, "NotScaledToZero", "the HPA controller did not scale the workload to zero")
		}
		d.status.LastScaleTime = d.now
	} else {
		desired = current
	}
	d.status.CurrentReplicas = current
	d.status.DesiredReplicas = desired
	d.status.CurrentMetrics = metricStatuses
	return Decision{
		DesiredReplicas: desired,
		Rescale:         rescale,
		Error:           reconcileErr,
		Status:          d.status,
		Explanation:     d.explain,
		History:         d.hist,
	}
}

// computeMetrics is upstream's computeReplicasForMetrics: the largest
// proposal wins; when every metric failed, or some failed and the valid
// ones would scale down, the decision fails (failed is true). errText is
// the error to report, which may be set even when failed is false.
func (d *decider) computeMetrics() (proposal int32, statuses []MetricStatus, errText string, failed bool) {
	in := &d.in
	if in.Scale.Selector == "" {
		d.setCondition(ScalingActive, ConditionFalse, "InvalidSelector", "the HPA target's scale is missing a selector")
		return -1, nil, "selector is required", true
	}
	if in.Scale.SelectorError != "" {
		msg := "couldn't convert selector into a corresponding internal selector object: " + in.Scale.SelectorError
		d.setCondition(ScalingActive, ConditionFalse, "InvalidSelector", msg)
		return -1, nil, msg, true
	}
	tols := tolerances{down: in.Settings.Tolerance, up: in.Settings.Tolerance}
	if b := in.Spec.Behavior; b != nil {
		tols = tolerances{down: b.ScaleDown.Tolerance, up: b.ScaleUp.Tolerance}
	}
	c := &calculator{in: *in, tols: tols, pods: d.pods}
	n := len(in.Spec.Metrics)
	var values []metricValues
	if o := d.out; n <= blockMetrics {
		statuses, d.explain.Metrics, values = o.statuses[:n:n], o.explains[:n:n], o.values[:n:n]
	} else {
		statuses, d.explain.Metrics, values = make([]MetricStatus, n), make([]MetricExplanation, n), make([]metricValues, n)
	}
	invalid := 0
	var first *metricError
	metric := ""
	for i := range in.Spec.Metrics {
		r, merr := c.evaluate(i, in.Scale.Replicas, &values[i])
		d.explain.Metrics[i] = r.explain
		if merr != nil {
			if invalid == 0 {
				first = merr
			}
			invalid++
			continue
		}
		statuses[i] = r.status
		if proposal == 0 || r.proposal > proposal {
			proposal = r.proposal
			metric = r.explain.Name
			d.explain.Winner = i
		}
	}
	if first != nil {
		errText = fmt.Sprintf("invalid metrics (%d invalid out of %d), first error is: %v", invalid, n, first.err)
	}
	if invalid >= n || (invalid > 0 && proposal < in.Scale.Replicas) {
		d.setCondition(ScalingActive, ConditionFalse, first.reason, "the HPA was unable to compute the replica count: "+first.shown.Error())
		d.explain.Winner = -1
		return -1, statuses, errText, true
	}
	d.setCondition(ScalingActive, ConditionTrue, "ValidMetricFound", validMetricMessage(metric))
	return proposal, statuses, errText, false
}

// rescaleMessage is the AbleToScale message of a rescale to desired
// replicas, built in one allocation.
func rescaleMessage(desired int32) string {
	const prefix = "the HPA controller was able to update the target scale to "
	var buf [len(prefix) + 11]byte
	return string(strconv.AppendInt(append(buf[:0], prefix...), int64(desired), 10))
}

// step appends an adjustment to the explanation.
func (d *decider) step(kind StepKind, from, to int32, reason, message string) {
	if d.explain.Steps == nil {
		d.explain.Steps = d.out.steps[:0:maxSteps]
	}
	d.explain.Steps = append(d.explain.Steps, Step{Kind: kind, From: from, To: to, Reason: reason, Message: message})
}

// setCondition sets a condition as upstream's setConditionInList does: in
// place when the type exists, appended otherwise; the transition time moves
// only when the status changes.
func (d *decider) setCondition(t ConditionType, s ConditionStatus, reason, message string) {
	d.status.Conditions = setCondition(d.status.Conditions, t, s, reason, message, d.now)
}

func setCondition(list []Condition, t ConditionType, s ConditionStatus, reason, message string, now time.Time) []Condition {
	idx := -1
	for i := range list {
		if list[i].Type == t {
			idx = i
			break
		}
	}
	if idx < 0 {
		list = append(list, Condition{Type: t})
		idx = len(list) - 1
	}
	c := &list[idx]
	if c.Status != s {
		c.LastTransitionTime = now
	}
	c.Status, c.Reason, c.Message = s, reason, message
	return list
}

// rescaleFailed is RescaleFailed.
func rescaleFailed(prev Status, d Decision, at time.Time, message string) Status {
	st := cloneStatus(d.Status)
	st.DesiredReplicas = prev.DesiredReplicas
	st.LastScaleTime = prev.LastScaleTime
	st.Conditions = setCondition(st.Conditions, AbleToScale, ConditionFalse, "FailedUpdateScale",
		"the HPA controller was unable to update the target scale: "+message, at)
	var before *Condition
	for i := range prev.Conditions {
		if prev.Conditions[i].Type == ScaledToZero {
			before = &prev.Conditions[i]
		}
	}
	out := st.Conditions[:0]
	for _, c := range st.Conditions {
		if c.Type == ScaledToZero {
			if before == nil {
				continue
			}
			c = *before
		}
		out = append(out, c)
	}
	st.Conditions = out
	return st
}

// conditionTypes is the number of condition types: a status' conditions
// never outgrow it.
const conditionTypes = 4

// startStatus is the status a decision starts from: s with its own
// conditions, in out's while they fit. Its metrics are left out: every
// decision replaces them.
func startStatus(s Status, out *outputs) Status {
	if len(s.Conditions) <= conditionTypes {
		s.Conditions = append(out.conditions[:0:conditionTypes], s.Conditions...)
	} else {
		s.Conditions = append([]Condition(nil), s.Conditions...)
	}
	s.CurrentMetrics = nil
	return s
}

// startHistory is the history a decision starts from: h with its own
// recommendations, which the decision overwrites or extends. The scale
// events are shared: a decision reads them and never writes them
// (RecordScale copies them before it records).
func startHistory(h History) History {
	if h.Recommendations != nil {
		h.Recommendations = append(make([]Recommendation, 0, len(h.Recommendations)+1), h.Recommendations...)
	}
	return h
}

func cloneStatus(s Status) Status {
	s.Conditions = append(make([]Condition, 0, max(len(s.Conditions), conditionTypes)), s.Conditions...)
	s.CurrentMetrics = append([]MetricStatus(nil), s.CurrentMetrics...)
	return s
}

func cloneHistory(h History) History {
	if h.Recommendations != nil {
		h.Recommendations = append(make([]Recommendation, 0, len(h.Recommendations)+1), h.Recommendations...)
	}
	if h.ScaleUpEvents != nil {
		h.ScaleUpEvents = append([]ScaleEvent(nil), h.ScaleUpEvents...)
	}
	if h.ScaleDownEvents != nil {
		h.ScaleDownEvents = append([]ScaleEvent(nil), h.ScaleDownEvents...)
	}
	return h
}
