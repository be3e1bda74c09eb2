// Package metriclabel is the label vocabulary of the Kubernetes HPA
// controller's Prometheus metrics (reconciliations_total,
// reconciliation_duration_seconds, metric_computation_total and
// metric_computation_duration_seconds), spelled as the controller spells
// it, so that dashboards written for the controller read Setpoint's
// metrics too. The agent's setpoint_agent_ and the server's
// setpoint_server_ metrics of those names both take their action and
// error labels from here.
//
// It imports nothing, so the agent (which never decides) and the server
// can both use it.
package metriclabel

// The values of the action label: what a decision, or one metric's
// proposal, does to the replica count.
const (
	// ActionScaleUp: more replicas than the current count.
	ActionScaleUp = "scale_up"
	// ActionScaleDown: fewer replicas than the current count.
	ActionScaleDown = "scale_down"
	// ActionNone: the count stays (no rescale, or the same count).
	ActionNone = "none"
)

// The values of the error label: what, if anything, failed.
const (
	// ErrorNone: nothing failed.
	ErrorNone = "none"
	// ErrorSpec: the autoscaler's spec is invalid.
	ErrorSpec = "spec"
	// ErrorInternal: anything else failed (a metric that could not be
	// fetched or computed, the service unreachable).
	ErrorInternal = "internal"
)

// ActionOf is the action label of a change from current to desired
// replicas; rescale false (the decision does not rescale) is ActionNone
// whatever the counts.
func ActionOf(rescale bool, desired, current int32) string {
	switch {
	case !rescale || desired == current:
		return ActionNone
	case desired > current:
		return ActionScaleUp
	default:
		return ActionScaleDown
	}
}
