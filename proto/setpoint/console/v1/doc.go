// Package consolev1 is the gRPC service setpoint.console.v1 that the web
// console asks besides setpoint.v1: the SessionService (Who) and the
// ReplayService (Replay, the what-if; validate.go checks its request), generated
// from proto/setpoint/console/v1 by buf. docs/api/reference.md describes
// its messages.
package consolev1
