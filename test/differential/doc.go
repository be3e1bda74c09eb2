// Package differential runs Setpoint side by side with the Kubernetes HPA
// controller and fails on any difference a user could see.
//
// One real kube-apiserver and etcd (internal/kubetest) serve both sides; the
// test metrics server serves the three metrics APIs behind the aggregation
// layer; kube-controller-manager, built from the same pinned Kubernetes
// module, runs with only its HPA controller; the real Setpoint server runs
// in-process over loopback TCP with a bbolt file, and one Setpoint agent per
// case serves the case's Setpoint namespace.
//
// Every case builds two twin namespaces: in one, an autoscaling/v2
// HorizontalPodAutoscaler that kube-controller-manager serves; in the other,
// an Autoscaler with the same spec that the agent serves. Each namespace has
// a Deployment "app" with the same pods, readiness and metric timeline: the
// test plays ReplicaSet and kubelet, creating and deleting pods as the
// Deployment's replica count changes and writing their status. After every
// step of the timeline both sides must settle to the same observable state —
// replicas, desired replicas, the HPA conditions with their messages, current
// metrics and the Events — and at the end of the case both must have gone
// through the same sequence of replica counts.
//
// SETPOINT_DIFFERENTIAL_SKIP skips the suite (as SETPOINT_E2E_SKIP does for
// test/e2e); SETPOINT_DIFFERENTIAL_LONG stretches every window to the
// controller defaults (make differential-long).
package differential
