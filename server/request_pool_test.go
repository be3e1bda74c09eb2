package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"google.golang.org/protobuf/testing/protocmp"
)

// TestReleasedRequestNotStored: the server decodes each Recommend into
// request memory an earlier call handed back (package codec), so a
// stored record that kept any part of a request would change when later
// requests of other shapes reuse that memory. Each target's record, read
// right after its Recommend, reads the same after calls for other targets
// with more and fewer pods, containers and resources, and holds the
// decision made from its own request.
func TestReleasedRequestNotStored(t *testing.T) {
	ts := start(t, setup{opts: server.Options{Now: func() time.Time { return t0 }}})
	c := ts.client(t)
	var names []string
	first := map[string]*setpointv1.Target{}
	for i := range 18 {
		name := fmt.Sprintf("pooled-%d", i)
		req := shapedRequest(name, (i*5)%9)
		want := decisionOf(t, req)
		if _, err := c.Recommend(t.Context(), req); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := c.GetTarget(t.Context(), &setpointv1.GetTargetRequest{Target: key(name)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(want, got.GetTarget().GetLastDecision(), protocmp.Transform(), protocmp.IgnoreFields(&setpointv1.Decision{}, "decision_id")); diff != "" {
			t.Errorf("%s: stored decision (-from the request alone +stored):\n%s", name, diff)
		}
		names, first[name] = append(names, name), got.GetTarget()
	}
	for _, name := range names {
		got, err := c.GetTarget(t.Context(), &setpointv1.GetTargetRequest{Target: key(name)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(first[name], got.GetTarget(), protocmp.Transform()); diff != "" {
			t.Errorf("%s: the record changed after later calls (-after its call +at the end):\n%s", name, diff)
		}
	}
}
