// Package fleete2e tests the agent's fleet members end to end: a real
// kube-apiserver and etcd (internal/kubetest) holding two members'
// Autoscalers, one per "cluster", served by two agents with different
// cluster names, and the real Setpoint server with its FleetService over
// mutual TLS, each agent with its cluster's identity. It holds tests
// only.
package fleete2e
