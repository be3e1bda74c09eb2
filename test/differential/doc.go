// Package differential runs Setpoint side by side with the Kubernetes HPA
// controller and fails on any difference a user could see.
//
// Two real kube-apiservers, each with its own etcd (internal/kubetest),
// serve the cases. On the first, kube-controller-manager, built from the
// same pinned Kubernetes module, runs with only its HPA controller; the
// second has no controller manager, as a cluster whose built-in HPA
// controller is turned off. One test metrics server serves the three
// metrics APIs behind both aggregation layers; the real Setpoint server
// runs in-process over loopback TCP with a bbolt file, and one Setpoint
// agent per Setpoint twin serves the twin's namespace.
//
// A case runs on up to three twin namespaces: the reference, an
// autoscaling/v2 HorizontalPodAutoscaler that kube-controller-manager
// serves; an Autoscaler with the same spec on the same API server, served
// by the agent; and the same HPA on the second API server, served by the
// agent in native mode (-serve=hpas). Each namespace has a Deployment "app"
// with the same pods, readiness and metric timeline: the test plays
// ReplicaSet and kubelet, creating and deleting pods as the Deployment's
// replica count changes and writing their status. After every step of the
// timeline every twin must settle to the reference's observable state —
// replicas, desired replicas, the HPA conditions with their messages,
// current metrics and the Events — and at the end of the case all must have
// gone through the same sequence of replica counts.
//
// SETPOINT_DIFFERENTIAL_SKIP skips the suite (as SETPOINT_E2E_SKIP does for
// test/e2e); SETPOINT_DIFFERENTIAL_LONG stretches every window to the
// controller defaults (make differential-long). docs/differential.md lists
// the cases.
package differential
