package admission

import (
	"context"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// writeMethods are the calls that write to the store: each is announced
// to the store (Config.Expect) from the moment the server starts handling
// it until its handler hands it to the store (Arrived) or the call ends,
// so that a store that batches commits holds a batch open for it while
// its request is read, checked and converted.
var writeMethods = map[string]bool{
	setpointv1.AutoscalerService_Recommend_FullMethodName:    true,
	setpointv1.AutoscalerService_Observe_FullMethodName:      true,
	setpointv1.AutoscalerService_DeleteTarget_FullMethodName: true,
}

// announce tells expect (nil: nothing) of a call of method when it is a
// write, and marks n so that the write is taken off once (Arrived, or the
// call's end). Called from the stats handler's TagRPC: after the tap
// handle admitted the call, before its request is read.
func announce(expect func(int), method string, n *call) {
	if expect != nil && writeMethods[method] {
		n.expect = expect
		n.announced.Store(true)
		expect(1)
	}
}

// Arrived takes the write call of ctx off the writes announced to the
// store (Config.Expect): its handler calls it just before it calls the
// store's Update, Decide or Delete. A write is taken off once, by Arrived
// or at its call's end, whichever comes first; Arrived does nothing for a
// call that is not a write, a write already taken off, or a ctx outside a
// call of a server with the admission's stats handler.
func Arrived(ctx context.Context) {
	if n, ok := ctx.Value(callKey{}).(*call); ok {
		n.arrived()
	}
}

// arrived takes the write of n off the writes announced, once.
func (n *call) arrived() {
	if n.announced.CompareAndSwap(true, false) {
		n.expect(-1)
	}
}
