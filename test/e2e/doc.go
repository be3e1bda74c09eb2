// Package e2e holds the agent's end-to-end tests: a real kube-apiserver and
// etcd (built by make kube-binaries), the real Setpoint server over TCP and
// bbolt, and the agent, scaling Deployments, StatefulSets and a custom
// resource as the HPA controller would.
package e2e
