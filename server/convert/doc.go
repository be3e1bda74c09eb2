// Package convert is the one boundary between Setpoint's API
// (proto/setpoint/v1) and the engine's resolved types: every Kubernetes
// default is applied here, and only here, so the engine never sees "unset".
//
// Input turns a RecommendRequest into an engine.Input, validating it and
// resolving defaults:
//
//   - controller settings: tolerance 0.1, CPU initialization period 5m,
//     initial readiness delay 30s, downscale stabilization window 5m;
//   - spec.min_replicas absent: 1;
//   - a behavior, when present, gets the API server's defaulting: scale_up
//     absent → window 0, policies Pods 4/15s and Percent 100/15s, select
//     Max; scale_down absent → policies Percent 100/15s, select Max; a
//     scale-down window absent → the settings' downscale window in whole
//     seconds; select_policy empty → Max; a direction's tolerance absent →
//     the settings' tolerance (a present one is the quantity's
//     AsApproximateFloat64, as the controller reads it);
//   - quantities are parsed with k8s.io/apimachinery's resource package and
//     read as milli-values (MilliValue rounds up);
//   - Resource and ContainerResource targets use average_value when it is
//     set, otherwise average_utilization (the controller's order);
//     External targets likewise prefer average_value; Object targets follow
//     their type;
//   - the scale selector is parsed with the Kubernetes label parser: an
//     empty selector stays empty, a parse error goes to Scale.SelectorError;
//   - a Pods metric value without a window gets the controller's 60s.
//
// Invalid requests give a *setpointv1.ValidationError naming every bad
// field by its path in the request.
//
// An unexported inverse (engine.Input → RecommendRequest, every default
// made explicit) lets the package's tests check that Input(request(in))
// equals in apart from Now and Status, which the server supplies. The remaining
// functions convert engine and store values for the API's responses;
// quantities are printed in canonical form. A server converts into reused
// memory: InputIn into a Scratch, RecommendResponse into a Response.
package convert
