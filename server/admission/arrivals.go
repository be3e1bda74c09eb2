package admission

import (
	"context"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/store/boltstore"
)

// writeMethods are the calls that write to the store, counted in
// Config.Arrivals from the moment the server starts handling them until
// they reach the store (or end without reaching it).
var writeMethods = map[string]bool{
	setpointv1.AutoscalerService_Recommend_FullMethodName:    true,
	setpointv1.AutoscalerService_Observe_FullMethodName:      true,
	setpointv1.AutoscalerService_DeleteTarget_FullMethodName: true,
}

// arriving counts a call of method in arrivals (nil: none) when it is a
// write, and returns the context its handler must pass to the store.
// Called from the stats handler's TagRPC: after the tap handle admitted
// the call, before its request is read.
func arriving(ctx context.Context, arrivals *boltstore.Arrivals, method string) context.Context {
	if arrivals == nil || !writeMethods[method] {
		return ctx
	}
	return arrivals.Arrive(ctx)
}
