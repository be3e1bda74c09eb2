// Package e2e holds the agent's end-to-end tests: a real kube-apiserver and
// etcd (built by make kube-binaries), the real Setpoint server over TCP and
// bbolt, and the agent, scaling Deployments, StatefulSets and a custom
// resource as the HPA controller would — Autoscalers, and in native mode
// HorizontalPodAutoscalers, including next to the real
// kube-controller-manager (the agent stands down while its HPA controller
// runs).
package e2e
