// Package engine decides replica counts exactly as the Kubernetes v1.37
// Horizontal Pod Autoscaler controller (autoscaling/v2) does, as a pure
// function.
//
// # Contract
//
// Decide takes an Input — the resolved spec, controller settings, the
// target's Scale, its pods, what the metrics APIs answered, the previous
// status and Now — and the target's History, and returns a Decision: the
// replica count, whether to write it, the status (conditions and current
// metrics as the controller reports them), an Explanation and the History
// to keep. It reads no clock, does no I/O, keeps no globals and never sees
// "unset": the caller resolves defaults (tolerance 0.1, CPU initialization
// period 5m, initial readiness delay 30s, downscale window 5m, the API
// server's default behavior rules) before calling. Equal arguments give
// equal results on every platform: where upstream converts an out-of-range
// float to an integer, the engine reproduces what Go does on amd64.
//
// The Kubernetes controller keeps the history in memory; here it is data.
// After a rescale has been applied, RecordScale adds the scale event the
// behavior policies count; if it could not be applied, RescaleFailed gives
// the status to keep instead.
//
// # Algorithm
//
// A decision follows the controller's reconcile after it has read the
// target's scale:
//
//  1. AbleToScale=True/SucceededGetScale. A target seen for the first time
//     has its current count recorded as a recommendation.
//  2. Guards: with 0 replicas, scaling is disabled (ScalingActive=False/
//     ScalingDisabled, nothing written) unless the previous status says
//     ScaledToZero=True and minReplicas > 0 or an Object/External metric
//     exists. Above maxReplicas or below minReplicas the count is set to
//     the bound without looking at metrics.
//  3. Each metric proposes a count. Pod-based metrics (Resource,
//     ContainerResource, Pods) group the pods: failed and deleting pods are
//     ignored, pending pods are unready, pods without a sample are missing,
//     and for cpu only, pods whose readiness makes their sample doubtful are
//     unready. Utilization is an integer percent, floor(Σusage·100 /
//     Σrequests), milli-values throughout; the usage ratio is current over
//     target. Within tolerance (inclusive, per direction) the proposal is
//     the current count; otherwise ceil(ratio × ready pods). When pods are
//     missing, or unready during a scale-up, they are given fallback values
//     (the target or 100% of their request going down, 0 going up) and the
//     ratio is recomputed; if that flips the direction or falls within
//     tolerance the count stays. Object and External metrics use the ratio
//     against ready pods (Value) or status replicas (AverageValue); External
//     series are summed.
//  4. The largest proposal wins (ScalingActive=True/ValidMetricFound). If
//     every metric failed, or some failed and the rest would scale down,
//     the decision fails: ScalingActive=False with the first failure's
//     reason, the desired count of the previous status is kept.
//     Proposals from outside the metrics (Input.Proposals: schedule
//     floors, forecasts, a fallback) are merged by max with the metrics'
//     proposal; a fallback counts only when some metric failed, and lets a
//     decision whose metrics all failed continue (FallbackActive=True)
//     where the controller would hold. A proposal that wins is a Proposal
//     step naming it. Everything below applies to the merged count. With
//     no proposals this step does nothing: the decision is the
//     controller's.
//  5. Normalization. Without a behavior: the maximum of the recommendations
//     within the downscale window (ScaleDownStabilized), then at most
//     max(2×current, 4) and within [min, max]. With a behavior: the
//     recommendations within each direction's stabilization window bound
//     the count (ScaleUpStabilized/ScaleDownStabilized), then each policy
//     allows a change from the count at the start of its period, computed
//     from the recorded scale events (ScaleUpLimit/ScaleDownLimit), chosen
//     by selectPolicy, and min/max apply (TooManyReplicas/TooFewReplicas).
//     ScalingLimited says whether this step moved the count.
//  6. If the count differs from the current one the target is rescaled:
//     AbleToScale=True/SucceededRescale, and ScaledToZero is True when the
//     scale went from >0 to 0 with minReplicas 0 and an Object/External
//     metric, False otherwise.
//
// # Worked example
//
// A Deployment runs 3 ready pods, each requesting 500m cpu; the metrics API
// reports 460m, 430m and 470m. The spec targets 60% cpu utilization, min 1,
// max 10, no behavior; tolerance is 0.1.
//
//	utilization = floor((460+430+470)·100 / (500+500+500)) = floor(90.67) = 90
//	ratio       = 90 / 60 = 1.5            (outside [0.9, 1.1])
//	proposal    = ceil(1.5 × 3 ready pods) = 5
//	stabilized  = max(5, recommendations in the last 5m) = 5 (say none higher)
//	limit       = min(max(2×3, 4), 10) = 6, so 5 stands: DesiredWithinRange
//
// The decision writes 5. Its Explanation lists the cpu metric with outcome
// Scaled, ratio 1.5 and 3 ready pods as the winner, and no steps, since
// neither stabilization nor a limit moved the count. Had a recommendation
// of 7 been made 2 minutes earlier, stabilization would raise the count to
// 7 (a Stabilized step 5 → 7, reason ScaleDownStabilized) and the legacy
// rate limit would bring it back to 6 (a Limited step 7 → 6, reason
// ScaleUpLimit): the decision would write 6.
package engine
