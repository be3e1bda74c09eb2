// Package setpointv1 is Setpoint's gRPC API, setpoint.v1: the
// AutoscalerService (Recommend, Observe, GetTarget, ListTargets,
// DeleteTarget, Simulate, Watch) and the AdminService, generated from
// proto/setpoint/v1 by buf, with request validation (validate.go) written
// by hand. docs/api/reference.md describes every message and field.
package setpointv1
