// Package twin runs cluster twins for tests and demonstrations: small
// Kubernetes clusters on loopback in which workloads behave as in a real
// one, so that an autoscaler's loop — more replicas, less load per pod —
// closes.
//
// A twin is:
//
//   - kube-apiserver and etcd (internal/kubetest), or an API server on an
//     etcd another twin runs, under its own prefix (Options.Cluster's
//     EtcdURL and EtcdPrefix), which saves an etcd process per twin;
//   - kube-controller-manager with the workload controllers
//     (WorkloadControllers: Deployments, ReplicaSets, StatefulSets, the
//     garbage collector, namespaces) and, in a reference twin
//     (Options.Reference), its HPA controller; a Setpoint twin leaves
//     HorizontalPodAutoscalers and Autoscalers to a Setpoint agent;
//   - kube-scheduler, which binds the pods the ReplicaSet controller
//     creates to
//   - simulated nodes (Options.Nodes) that kwok (sigs.k8s.io/kwok) keeps
//     Ready, moving their pods through their lives with the Stages of
//     stages.go: bound → running, not Ready (PodTiming.Start plus jitter) →
//     Ready (PodTiming.Ready plus jitter); deleted → gone
//     (PodTiming.Terminate);
//   - the metrics APIs (internal/kubetest/metricsserver, registered with
//     the aggregation layer), fed by load models: AddWorkload gives a
//     workload a Trace of demand over time, and at every tick each Ready
//     pod's CPU is its share of the demand (plus noise), each starting pod
//     uses a burst, and optionally a pods custom metric and an external
//     metric follow the same demand.
//
// # Nothing leaves loopback
//
// Every server listens on 127.0.0.1. Simulated nodes report NodeIP and
// pods get addresses in PodCIDR, both documentation ranges (RFC 5737) that
// no network routes; kwok serves no kubelet API (no --server-address), so
// the API server has nothing to proxy logs or exec to, and the twin runs
// no kube-proxy, endpoint or node-lifecycle controller that would act on
// those addresses.
//
// # Cost
//
// On a 2-core machine a twin's processes (apiserver, etcd, controller
// manager, scheduler, kwok) start in a few seconds; docs/fleet-twin.md has
// their measured memory and CPU.
//
// # Binaries
//
// hack/kube-binaries.sh builds kube-scheduler and kwok into the same
// cached directory as the other kube binaries (kwok at the version the
// script pins, from the Go module proxy).
package twin
