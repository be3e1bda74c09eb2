// Package hpa turns what the Kubernetes HPA controller reads into the
// Setpoint API's RecommendRequest: an autoscaling/v2
// HorizontalPodAutoscaler spec, the target's Scale subresource, its pods and
// the answers of the resource, custom and external metrics APIs.
//
// It is the one place where a Kubernetes spec becomes a request. The agent
// builds every Recommend call with it, and the conformance drivers replay
// the corpus through it, so the service sees a spec the same way whether it
// comes from a cluster or from a recorded scenario.
//
// # Defaults
//
// A spec is read as the API server stores it: Default applies what the API
// server's defaulting (SetDefaults_HorizontalPodAutoscaler in Kubernetes)
// fills in before anything reads the object:
//
//   - minReplicas: 1 when absent;
//   - metrics: when empty, one Resource metric, cpu at 80% average
//     utilization;
//   - behavior, when present: each direction's absent fields from the
//     defaults — scale-up: stabilization window 0 s, policies Pods 4 / 15 s
//     and Percent 100 / 15 s, selectPolicy Max; scale-down: policy Percent
//     100 / 15 s, selectPolicy Max, and no stabilization window (the
//     controller's downscale stabilization setting applies).
//
// An absent behavior stays absent (the controller's legacy behavior), and
// so does an absent per-direction tolerance (the controller's tolerance
// applies). Controller-wide settings that are not sent are the service's
// to default.
//
// The request carries raw values — quantities as strings, times as
// timestamps; the service validates and resolves them. This package never
// decides and imports neither the engine nor the store.
package hpa
