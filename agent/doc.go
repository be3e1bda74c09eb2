// Package agent is Setpoint's in-cluster agent: it watches Autoscaler custom
// resources (setpoint.dev/v1alpha1) — or, with Options.Serve, autoscaling/v2
// HorizontalPodAutoscalers themselves, or both — gathers what the
// Kubernetes HPA would read for each — the target's Scale subresource, its pods, and the values
// of the resource, custom and external metrics APIs — sends it to the
// Setpoint service, and applies the answer. The agent never decides: every
// replica count comes from the service.
//
// # The loop
//
// The controller follows kubernetes/sample-controller: informers for
// Autoscalers (dynamic, cached as typed objects without managed fields) and
// Pods feed a rate-limited workqueue, and each key is reconciled
// level-based. Every Autoscaler is reconciled once per sync period, at a
// fixed phase within the period drawn from a hash of its key, so the
// reconciles of thousands of Autoscalers are spread evenly over the period
// rather than queued at once; and at once when its generation changes.
//
// As in sample-controller, the informers are the caller's: it builds the
// informer factories (for the namespace served, without resync), passes
// the informers in Options.Informers (InformersFrom picks those of the
// kinds served), starts the factories once New has added its handlers,
// and shuts them down after Run returns. Under leader election all of
// this happens within one term's context (cmd/setpoint-agent), so a new
// leader lists afresh.
//
// One reconcile:
//
//  1. reads the target's Scale subresource (any kind that has one, found
//     through a discovery-backed RESTMapper);
//  2. observes an external change of spec.replicas (someone else scaled
//     the target since the last reconcile) and reports it to the service;
//  3. lists the pods matching the Scale's status.selector from the pod
//     informer and fetches every metric of the spec — a fetch error is
//     recorded for that metric in the request, not for the whole call;
//  4. calls Recommend with a deadline; when told to rescale (and not in
//     dryRun) updates the Scale with retry on conflict and calls Observe
//     with what was applied or why it failed;
//  5. writes the status and Events with the HPA's reasons; a status equal
//     to the stored one at the API's precision (times in whole seconds)
//     is not written, so an unchanged reconcile makes two requests to the
//     Kubernetes API (the Scale and the pod metrics).
//
// All Kubernetes clients share one client-side rate limit
// (KubeClientOptions), and the agent logs when that limit is what delays
// requests. When Run's context ends the workers take no further key;
// reconciles in flight finish within Options.ShutdownGrace.
//
// # Native HPA mode
//
// Serving HPAs (ServeHPAs, ServeBoth) replaces kube-controller-manager's
// HPA controller, which must then be off (docs/native-hpa.md). An HPA goes
// through the same loop as an Autoscaler, under the queue key
// "hpa:namespace/name" and the service target name "hpa:<name>"; the
// agent writes the status fields the controller writes (currentReplicas,
// desiredReplicas, lastScaleTime, currentMetrics, conditions,
// observedGeneration once the scale was read) and records Events through
// client-go's core/v1 recorder under the controller's source
// "horizontal-pod-autoscaler". Its own marks are two annotations,
// DecisionAnnotation and ExplanationAnnotation, written with each status
// change, and — only while the service fails — the ServiceAvailable=False
// condition.
//
// If another field manager wrote an HPA's status within
// Options.StandDownWindow (the built-in controller still on, or another
// autoscaler), the agent stands down for that HPA: it neither decides nor
// scales, sets ConditionStandingDown, records a Warning Event
// (ReasonAnotherController) when it starts, and exports
// setpoint_agent_standing_down. It serves the HPA again once that manager
// has been quiet for the window.
//
// AmbiguousSelector sees every autoscaler the agent serves, both kinds
// together. What the last reconcile left the target at is read from the
// status (leftAt), so an external change is noticed after a leader
// failover too.
//
// # Fleets
//
// An Autoscaler with spec.fleet is a member of a fleet (docs/fleets.md):
// one autoscaler, kept by the service, over a workload that runs in
// several clusters. Its reconcile (reconcileFleet, Options.Fleets) reads
// the Scale, the pods and the metrics of the fleet's spec — the spec the
// last FleetService.Report answer carried, or GetFleet's before the first
// — through the same calls and conversion as steps 1–3 above, reports them
// as the member Options.Cluster, and sets the workload's replicas to the
// member's share whenever they differ (one report per sync: the service
// counts a member at the share it was answered with until its next
// report). It leaves them alone before the fleet's first split and while the split excludes the member. The report
// says the member cannot scale when its workload is missing, its Scale
// update was refused (and a write of the current count still is), or
// another autoscaler selects its pods. The status holds the share
// (desiredReplicas), the fleet's total (fleetReplicas) and the
// FleetShare condition; the Autoscaler's own limits, metrics and
// behavior are not used.
//
// # Failures
//
// When the service is unreachable or slow (gRPC Unavailable or
// DeadlineExceeded) the agent changes nothing on the target, sets the
// ServiceAvailable condition to False with reason ServiceUnavailable, and
// requeues the key with the workqueue's exponential back-off; it recovers
// on its own when the service answers again. When the service rejects the
// request (InvalidArgument) the agent sets ServiceAvailable=False with
// reason InvalidSpec and the field violations as the message, emits a
// Warning Event, and waits for the next sync period or a spec change: no
// hot loop.
package agent
