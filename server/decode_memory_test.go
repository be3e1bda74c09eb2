package server_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/server/convert"
	"github.com/setpointhq/setpoint/target"
	"google.golang.org/protobuf/testing/protocmp"
)

// TestRecommendReusesResponseMemory: a server answers each Recommend in
// response memory its earlier calls gave back (package admission,
// convert.Response). Requests of many shapes — pods, containers and resources coming and going, so that
// arrays and maps are reused for other entries — sent by concurrent
// callers, each get the decision made from the request itself: the one
// target.Decide makes from the request converted on its own.
func TestRecommendReusesResponseMemory(t *testing.T) {
	ts := start(t, setup{opts: server.Options{Now: func() time.Time { return t0 }}})
	c := ts.client(t)
	const callers, calls = 4, 12
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for i := range calls {
				name := fmt.Sprintf("shape-%d-%d", g, i)
				req := shapedRequest(name, (g*calls+i)%9)
				want := decisionOf(t, req)
				resp, err := c.Recommend(t.Context(), req)
				if err != nil {
					t.Errorf("%s: %v", name, err)
					return
				}
				if diff := cmp.Diff(want, resp.GetDecision(), protocmp.Transform(), protocmp.IgnoreFields(&setpointv1.Decision{}, "decision_id")); diff != "" {
					t.Errorf("%s: decision (-from the request alone +server):\n%s", name, diff)
				}
			}
		})
	}
	wg.Wait()
}

// shapedRequest is request(name) in one of nine shapes: 1 to 9 pods,
// some of two containers, the pods' and containers' resource maps of one
// to three entries, with overhead on some.
func shapedRequest(name string, shape int) *setpointv1.RecommendRequest {
	req := request(name, shape+1, t0)
	for i, p := range req.GetPods() {
		ct := p.Containers[0]
		switch (shape + i) % 3 {
		case 1:
			ct.Requests["memory"] = fmt.Sprintf("%dMi", 128*(i+1))
			p.Overhead = map[string]string{"cpu": "10m"}
		case 2:
			ct.Requests["memory"], ct.Requests["ephemeral-storage"] = "1Gi", "2Gi"
			p.Containers = append(p.Containers, &setpointv1.Container{Name: "sidecar", Requests: map[string]string{"cpu": "100m"}})
			usage := req.ResourceMetrics.Items[i]
			usage.Containers = append(usage.Containers, &setpointv1.ContainerMetrics{Name: "sidecar", Usage: map[string]string{"cpu": fmt.Sprintf("%dm", 20+i)}})
		}
	}
	return req
}

// decisionOf is the decision target.Decide makes for req on a new target
// at t0, in the API's form.
func decisionOf(t *testing.T, req *setpointv1.RecommendRequest) *setpointv1.Decision {
	in, err := convert.Input(req, t0)
	if err != nil {
		t.Fatal(err)
	}
	rec := target.Record{Key: convert.Key(req.GetTarget())}
	if err := target.Decide(&rec, target.Input{Ref: convert.TargetRef(req.GetSpec().GetScaleTargetRef()), Engine: in}, "", t0); err != nil {
		t.Fatal(err)
	}
	return convert.Decision(*rec.Last)
}
