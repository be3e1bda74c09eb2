package simulate

import (
	"fmt"

	"github.com/setpointhq/setpoint/engine"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// replayRequest (hundred units of request per resource) is what each pod of
// a replay requests of every resource a utilization metric reads, so that a
// logged utilization of u percent replays as a usage of u units.
const replayRequest = "100"

// ReplayLimits say, in words, how a replay (Replay) differs from what the
// target lived through; the console shows them beside a replay.
var ReplayLimits = []string{
	"Pods are rebuilt from the logged counts: every pod is identical, ready and started long before the first decision; unready and missing pods, readiness delays and CPU initialization are not replayed.",
	"Each metric replays its logged value per pod (or its total, for Object and External metrics): when the alternative runs a different number of replicas, the load is not spread over them, so the two curves are comparable up to where they first part and approximate after.",
	"The replay starts with an empty history at the oldest logged decision: stabilization windows and policy periods reaching further back than the log are not seen, and a forecast starts from the target's stored metric history as it stood at that decision (silent if that held less than two days).",
	"Every rescale the alternative decides is applied before its next decision; rescales that failed and replica changes made outside the autoscaler are not replayed.",
	"Metric fetches that failed replay as failures; a metric the log has no value for (a spec with more metrics than the log) fails too.",
}

// Replay is the Simulate request that replays logged decisions (oldest
// first) with spec and settings: a pod model starting at the first
// decision's replica count, one step per decision at its time with each
// metric's logged value (see ReplayLimits). The caller bounds the
// decisions by the step limit.
func Replay(spec *setpointv1.HorizontalPodAutoscalerSpec, settings *setpointv1.ControllerSettings, logged []*setpointv1.LoggedDecision) *setpointv1.SimulateRequest {
	req := &setpointv1.SimulateRequest{Spec: spec, Settings: settings, PodModel: &setpointv1.PodModel{Requests: map[string]string{}}}
	if len(logged) > 0 {
		req.PodModel.InitialReplicas = logged[0].GetExplanation().GetCurrentReplicas()
	}
	for _, m := range spec.GetMetrics() {
		if name, t := resourceTarget(m); name != "" && t.GetType() == string(engine.UtilizationTarget) {
			req.PodModel.Requests[name] = replayRequest
		}
	}
	for _, d := range logged {
		step := &setpointv1.SimulateStep{Time: d.GetDecisionTime()}
		for j, m := range spec.GetMetrics() {
			step.MetricValues = append(step.MetricValues, replayValue(m, d, j))
		}
		req.Steps = append(req.Steps, step)
	}
	return req
}

// resourceTarget returns the resource name and target of a Resource or
// ContainerResource metric; "" for the other types.
func resourceTarget(m *setpointv1.MetricSpec) (string, *setpointv1.MetricTarget) {
	switch {
	case m.GetResource() != nil:
		return m.GetResource().GetName(), m.GetResource().GetTarget()
	case m.GetContainerResource() != nil:
		return m.GetContainerResource().GetName(), m.GetContainerResource().GetTarget()
	}
	return "", nil
}

// replayValue is the pod model's value of metric m (index j of the spec)
// that reproduces what decision d measured: "" (a failed fetch) when d
// has no value for it.
func replayValue(m *setpointv1.MetricSpec, d *setpointv1.LoggedDecision, j int) string {
	metrics := d.GetExplanation().GetMetrics()
	if j >= len(metrics) || metrics[j].GetOutcome() == string(engine.OutcomeFailed) {
		return ""
	}
	cur := metrics[j].GetCurrent()
	if _, t := resourceTarget(m); t != nil && t.GetType() == string(engine.UtilizationTarget) {
		return fmt.Sprint(cur) // percent of replayRequest
	}
	var t *setpointv1.MetricTarget
	switch {
	case m.GetObject() != nil:
		t = m.GetObject().GetTarget()
	case m.GetExternal() != nil:
		t = m.GetExternal().GetTarget()
	}
	if t.GetType() == string(engine.AverageValueTarget) {
		// Logged as the total over the replica count; replayed as the total.
		cur *= int64(d.GetExplanation().GetCurrentReplicas())
	}
	return fmt.Sprintf("%dm", cur)
}
