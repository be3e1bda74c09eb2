package admission

import (
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// writeMethods are the calls that write to the store: each is announced
// to the store (Config.Expect) from the moment the server starts handling
// it until its request is read, so that a store that batches commits
// holds a batch open for it meanwhile.
var writeMethods = map[string]bool{
	setpointv1.AutoscalerService_Recommend_FullMethodName:    true,
	setpointv1.AutoscalerService_Observe_FullMethodName:      true,
	setpointv1.AutoscalerService_DeleteTarget_FullMethodName: true,
}

// announce tells expect (nil: nothing) of a call of method when it is a
// write, and marks n so that arrived takes it off once. Called from the
// stats handler's TagRPC: after the tap handle admitted the call, before
// its request is read.
func announce(expect func(int), method string, n *call) {
	if expect != nil && writeMethods[method] {
		n.announced.Store(true)
		expect(1)
	}
}

// arrived takes the write of n off expect once: when its request has been
// read (InPayload), or at its end for a call whose request never was.
func arrived(expect func(int), n *call) {
	if n.announced.CompareAndSwap(true, false) {
		expect(-1)
	}
}
