package codec

import (
	"context"
	"fmt"
	"net"
	"testing"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// keeper is an AutoscalerService that keeps every Recommend request it
// receives, as it receives it (without copying), and a copy of it.
type keeper struct {
	setpointv1.UnimplementedAutoscalerServiceServer
	kept, copies []*setpointv1.RecommendRequest
}

func (k *keeper) Recommend(_ context.Context, r *setpointv1.RecommendRequest) (*setpointv1.RecommendResponse, error) {
	k.kept = append(k.kept, r)
	k.copies = append(k.copies, proto.Clone(r).(*setpointv1.RecommendRequest))
	return &setpointv1.RecommendResponse{Decision: &setpointv1.Decision{DecisionId: r.GetTarget().GetName()}}, nil
}

// TestRegistrarHandsBackRequest: over a real listener, a Recommend request
// a handler registered through Registrar received is cleared when its call
// has ended (its memory goes to the next call), while a copy the handler
// made is not; each call decodes its own request in full, whatever the
// sizes of the ones before it.
func TestRegistrarHandsBackRequest(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(DecodeOptions()...)
	k := &keeper{}
	setpointv1.RegisterAutoscalerServiceServer(Registrar(srv), k)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := setpointv1.NewAutoscalerServiceClient(conn)
	var sent []*setpointv1.RecommendRequest
	for i, pods := range []int{5, 1, 3, 0, 8, 2} { // lists grow and shrink
		req := fullRequest(pods)
		req.Target.Name = fmt.Sprint("web-", i)
		resp, err := c.Recommend(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.GetDecision().GetDecisionId(); got != req.Target.Name {
			t.Errorf("call %d: the handler saw target %q, want %q", i, got, req.Target.Name)
		}
		sent = append(sent, req)
	}
	for i, req := range sent {
		if !proto.Equal(normalized(k.copies[i]), normalized(req)) {
			t.Errorf("call %d: the handler received %v, the client sent %v", i, k.copies[i], req)
		}
		if k.kept[i].GetTarget() != nil || len(k.kept[i].GetPods()) != 0 || k.kept[i].GetResourceMetrics() != nil {
			t.Errorf("call %d: the request the handler kept was not cleared after the call: %v", i, k.kept[i])
		}
	}
}

// TestKeptRequestKeepsPodMaps: a Recommend kept across calls gives its
// pods and containers their maps back, cleared, and keeps its resource
// metrics with their containers' usage maps, so that the next decoding
// fills them instead of making new ones; a request decoded into it holds
// only its own entries (not those of a request before it), with the maps
// of a pod it does not have left empty, and has resource metrics exactly
// when it was sent with them (absent, or present and empty).
func TestKeptRequestKeepsPodMaps(t *testing.T) {
	first := fullRequest(3)
	first.Pods[0].Containers[0].Requests["ephemeral-storage"] = "1Gi"
	first.ResourceMetrics.Items[1].Containers[0].Usage["memory"] = "2Gi"
	second := fullRequest(2)
	second.Pods[0].Overhead = nil
	second.Pods[1].Containers[0].Requests = map[string]string{"cpu": "2"}
	second.ResourceMetrics.Items[0].Containers[0].Usage = nil
	absent := fullRequest(1)
	absent.ResourceMetrics = nil
	empty := fullRequest(2)
	empty.ResourceMetrics = &setpointv1.ResourceMetrics{}
	k := &keptRequest{req: &setpointv1.RecommendRequest{}}
	r := k.req.(*setpointv1.RecommendRequest)
	var rm *setpointv1.ResourceMetrics // the kept one, once there is one
	for i, req := range []*setpointv1.RecommendRequest{first, second, absent, first, empty, second, absent} {
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if err := decodeKept(b, r, k.rm); err != nil { // as decodeChecked's handler decodes
			t.Fatal(err)
		}
		if !proto.Equal(r, req) {
			t.Fatalf("decoding %d into the kept request: got %v, want %v", i, r, req)
		}
		if rm != nil && req.ResourceMetrics != nil && r.ResourceMetrics != rm {
			t.Fatalf("decoding %d: the resource metrics were not decoded into the kept ones", i)
		}
		k.reset()
		if r.GetTarget() != nil || len(r.GetPods()) != 0 || r.ResourceMetrics != nil {
			t.Fatalf("after decoding %d, reset left %v", i, r)
		}
		pods := r.Pods[:cap(r.Pods)]
		if len(pods) < 2 || pods[0].Containers[:1][0].Requests == nil || pods[1].Requests == nil {
			t.Fatalf("after decoding %d, reset did not keep the pods' maps", i)
		}
		for _, p := range pods {
			if p != nil && len(p.Requests)+len(p.Overhead) != 0 {
				t.Fatalf("after decoding %d, reset kept a map's entries: %v, %v", i, p.Requests, p.Overhead)
			}
		}
		rm = k.rm
		if rm == nil || len(rm.Items) != 0 || rm.Error != "" {
			t.Fatalf("after decoding %d, reset kept no cleared resource metrics: %v", i, rm)
		}
		items := rm.Items[:cap(rm.Items)]
		if len(items) < 2 || items[1].Containers[:1][0].Usage == nil {
			t.Fatalf("after decoding %d, reset did not keep the usage maps", i)
		}
		for _, p := range items {
			if p == nil {
				continue
			}
			for _, c := range p.Containers[:cap(p.Containers)] {
				if c != nil && len(c.Usage) != 0 {
					t.Fatalf("after decoding %d, reset kept a usage map's entries: %v", i, c.Usage)
				}
			}
		}
	}
}
