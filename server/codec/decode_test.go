package codec

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// decodeSeeds are encoded Recommends that set every field the hand
// decoder decodes, and a few that it leaves to proto.Unmarshal.
func decodeSeeds(t testing.TB) (fast, slow [][]byte) {
	t.Helper()
	at := time.Date(2026, 11, 26, 12, 0, 0, 5, time.UTC)
	full := &setpointv1.RecommendRequest{
		Target:          &setpointv1.TargetKey{Cluster: "eu1", Namespace: "shop", Name: "web"},
		Spec:            &setpointv1.HorizontalPodAutoscalerSpec{MaxReplicas: 9, Metrics: []*setpointv1.MetricSpec{{Type: "Resource"}}},
		Settings:        &setpointv1.ControllerSettings{CpuInitializationPeriod: durationpb.New(time.Minute)},
		Scale:           &setpointv1.Scale{Replicas: 2, Selector: "app=web"},
		ResourceMetrics: &setpointv1.ResourceMetrics{Error: "partial"},
		Observations: []*setpointv1.MetricObservation{{Error: "none"}, {Values: []*setpointv1.MetricValue{
			{Pod: "web-0", Value: "12", Timestamp: timestamppb.New(at), Window: durationpb.New(-time.Second)}, {}}}},
	}
	for i := range 3 {
		name := fmt.Sprint("web-", i)
		full.Pods = append(full.Pods, &setpointv1.Pod{Name: name, Phase: "Running", Deleting: i == 2, StartTime: timestamppb.New(at.Add(-time.Hour)),
			Ready:      &setpointv1.PodReadyCondition{Status: "True", LastTransitionTime: timestamppb.New(at)},
			Containers: []*setpointv1.Container{{Name: "app", Requests: map[string]string{"cpu": "500m", "": "x", "memory": ""}}, {Name: "init", Init: true, RestartableInit: true}, {}},
			Requests:   map[string]string{"cpu": "1"}, Overhead: map[string]string{"memory": "1Mi"}})
		full.ResourceMetrics.Items = append(full.ResourceMetrics.Items, &setpointv1.PodMetrics{Pod: name, Timestamp: timestamppb.New(at), Window: durationpb.New(30 * time.Second),
			Containers: []*setpointv1.ContainerMetrics{{Name: "app", Usage: map[string]string{"cpu": "300m"}}, {Name: "side", Usage: map[string]string{}}}})
	}
	full.Pods = append(full.Pods, &setpointv1.Pod{}, &setpointv1.Pod{Ready: &setpointv1.PodReadyCondition{}})
	for _, m := range []*setpointv1.RecommendRequest{full, {}, {Pods: []*setpointv1.Pod{{}}}, {ResourceMetrics: &setpointv1.ResourceMetrics{}}} {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		fast = append(fast, b)
	}
	// Twice a message field (merged), fields out of order.
	b, _ := proto.Marshal(&setpointv1.RecommendRequest{Pods: []*setpointv1.Pod{{Name: "a", Ready: &setpointv1.PodReadyCondition{Status: "True"}}}, ResourceMetrics: &setpointv1.ResourceMetrics{Error: "x"}})
	c, _ := proto.Marshal(&setpointv1.RecommendRequest{Target: &setpointv1.TargetKey{Name: "t"}, ResourceMetrics: &setpointv1.ResourceMetrics{Items: []*setpointv1.PodMetrics{{Pod: "a"}}}})
	fast = append(fast, append(append([]byte{}, b...), c...), append(append([]byte{}, c...), b...))
	// An unknown field; a known field with another wire type; invalid UTF-8.
	slow = append(slow,
		protowire.AppendVarint(protowire.AppendTag(append([]byte{}, fast[0]...), 99, protowire.VarintType), 1),
		protowire.AppendVarint(protowire.AppendTag(nil, 5, protowire.VarintType), 1),
		protowire.AppendString(protowire.AppendTag(nil, 5, protowire.BytesType), string(protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "\xff"))))
	return fast, slow
}

// TestDecodeRecommend: the hand decoder decodes every seed as
// proto.Unmarshal does, into new memory and into memory that decoded the
// other seeds before (reused twice over, in both orders), and leaves the
// others to it; Codec, and the server's Request with its interceptor,
// give the same message or error as proto.Unmarshal for all.
func TestDecodeRecommend(t *testing.T) {
	fast, slow := decodeSeeds(t)
	seeds := append(fast, slow...)
	reused := new(decodeMemory)
	for _, order := range [][][]byte{seeds, slices.Concat(seeds, seeds), reversed(seeds)} {
		for i, b := range order {
			want := &setpointv1.RecommendRequest{}
			wantErr := proto.Unmarshal(b, want)
			for _, m := range []*decodeMemory{fresh, reused} {
				got := &setpointv1.RecommendRequest{}
				handled := decodeRecommend(b, got, m)
				if isFast := slices.ContainsFunc(fast, func(f []byte) bool { return bytes.Equal(f, b) }); handled != isFast {
					t.Errorf("seed %d: decoded by hand %v, want %v", i, handled, isFast)
				}
				if handled {
					if diff := gocmp.Diff(want, got, protocmp.Transform()); diff != "" || wantErr != nil {
						t.Errorf("seed %d (fresh memory %v): proto.Unmarshal error %v, (-proto.Unmarshal +hand):\n%s", i, m.fresh, wantErr, diff)
					}
				}
				if !m.fresh {
					m.release()
				}
			}
			viaCodec := &setpointv1.RecommendRequest{}
			err := Codec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, viaCodec)
			if (err != nil) != (wantErr != nil) {
				t.Errorf("seed %d: codec error %v, proto.Unmarshal error %v", i, err, wantErr)
			}
			if err == nil && !proto.Equal(want, viaCodec) {
				t.Errorf("seed %d: codec decoded %v, proto.Unmarshal %v", i, viaCodec, want)
			}
			viaServer := &setpointv1.RecommendRequest{}
			if err := NewRequest().Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, viaServer); err != nil {
				t.Fatalf("seed %d: Request returned %v (it notes errors)", i, err)
			}
			_, err = RejectUndecodable(t.Context(), viaServer, nil, func(_ context.Context, req any) (any, error) {
				if !proto.Equal(want, req.(*setpointv1.RecommendRequest)) {
					t.Errorf("seed %d: the server decoded %v, proto.Unmarshal %v", i, req, want)
				}
				return nil, nil
			})
			if (status.Code(err) == codes.InvalidArgument) != (wantErr != nil) {
				t.Errorf("seed %d: server error %v, proto.Unmarshal error %v", i, err, wantErr)
			}
			if _, noted := notes.Load(viaServer); noted {
				t.Errorf("seed %d: a note stayed behind after the call", i)
			}
		}
	}
}

// reversed returns a reversed copy of s.
func reversed[S ~[]E, E any](s S) S {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}

// requestMaps returns the addresses of the resource maps of r's pods and
// pod metrics.
func requestMaps(r *setpointv1.RecommendRequest) []uintptr {
	var out []uintptr
	add := func(m map[string]string) {
		if m != nil {
			out = append(out, reflect.ValueOf(m).Pointer())
		}
	}
	for _, p := range r.GetPods() {
		add(p.GetRequests())
		add(p.GetOverhead())
		for _, c := range p.GetContainers() {
			add(c.GetRequests())
		}
	}
	for _, it := range r.GetResourceMetrics().GetItems() {
		for _, c := range it.GetContainers() {
			add(c.GetUsage())
		}
	}
	return out
}

// TestDecodeMemoryReuse: memory released after a request is cleared and
// decodes the next request of the same shape without making new arrays
// or maps; memory that decoded a huge request keeps none of it.
func TestDecodeMemoryReuse(t *testing.T) {
	fast, _ := decodeSeeds(t)
	m := new(decodeMemory)
	first := &setpointv1.RecommendRequest{}
	if !decodeRecommend(fast[0], first, m) {
		t.Fatal("the full seed did not decode by hand")
	}
	pod, podMap, items := first.Pods[0], first.Pods[0].Requests, m.podMetrics.taken
	maps := requestMaps(first)
	m.release()
	if !proto.Equal(pod, &setpointv1.Pod{}) || len(podMap) != 0 {
		t.Errorf("released memory keeps a request: pod %v, requests %v", pod, podMap)
	}
	second := &setpointv1.RecommendRequest{}
	if !decodeRecommend(fast[0], second, m) {
		t.Fatal("the full seed did not decode by hand into reused memory")
	}
	if second.Pods[0] != pod {
		t.Error("the second request's first pod is not the first one's, reused")
	}
	again := requestMaps(second)
	slices.SortFunc(maps, func(a, b uintptr) int { return cmp.Compare(a, b) })
	slices.SortFunc(again, func(a, b uintptr) int { return cmp.Compare(a, b) })
	if len(maps) == 0 || !slices.Equal(maps, again) {
		t.Errorf("the second request's %d maps are not the first one's %d, reused", len(again), len(maps))
	}
	if items == 0 || m.podMetrics.taken != items || cap(m.podMetrics.block) != items {
		t.Errorf("pod metrics: %d taken by the first request, %d by the second from a block of %d", items, m.podMetrics.taken, cap(m.podMetrics.block))
	}
	m.release()

	huge := &setpointv1.RecommendRequest{}
	for range maxArenaEntries + 1 {
		huge.Pods = append(huge.Pods, &setpointv1.Pod{Requests: map[string]string{"cpu": "1"}})
	}
	b, err := proto.Marshal(huge)
	if err != nil {
		t.Fatal(err)
	}
	if !decodeRecommend(b, &setpointv1.RecommendRequest{}, m) {
		t.Fatal("the huge request did not decode by hand")
	}
	m.release()
	if cap(m.pods.block) != 0 || cap(m.podLists.block) != 0 || len(m.spare) > maxKeptMaps {
		t.Errorf("after a huge request, memory keeps %d pods, %d list entries, %d maps", cap(m.pods.block), cap(m.podLists.block), len(m.spare))
	}
}

// FuzzDecodeRecommend: whatever the hand decoder decodes, it decodes as
// proto.Unmarshal does.
func FuzzDecodeRecommend(f *testing.F) {
	fast, slow := decodeSeeds(f)
	for _, b := range append(fast, slow...) {
		f.Add(b)
	}
	// reused is memory that decoded the inputs before, as a server's does.
	reused := new(decodeMemory)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range []*decodeMemory{fresh, reused} {
			got := &setpointv1.RecommendRequest{}
			decoded := decodeRecommend(b, got, m)
			if decoded {
				want := &setpointv1.RecommendRequest{}
				if err := proto.Unmarshal(b, want); err != nil {
					t.Fatalf("decoded by hand what proto.Unmarshal refuses (%v): %v", err, got)
				}
				if !proto.Equal(want, got) {
					t.Fatalf("proto.Unmarshal %v, by hand (fresh memory %v) %v", want, m.fresh, got)
				}
			}
			if !m.fresh {
				m.release()
			}
			if !decoded {
				return
			}
		}
	})
}

// BenchmarkDecodeRecommend decodes an agent's usual Recommend (10 pods of
// two containers, two metrics) with Codec, with proto.Unmarshal, and with
// the server's codec, whose memory is reused from call to call.
func BenchmarkDecodeRecommend(b *testing.B) {
	req := &setpointv1.RecommendRequest{
		Target: &setpointv1.TargetKey{Cluster: "eu1", Namespace: "shop", Name: "web"},
		Spec:   &setpointv1.HorizontalPodAutoscalerSpec{MaxReplicas: 40, Metrics: []*setpointv1.MetricSpec{{Type: "Resource"}, {Type: "External"}}},
		Scale:  &setpointv1.Scale{Replicas: 10, Selector: "app=web"}, ResourceMetrics: &setpointv1.ResourceMetrics{},
		Observations: []*setpointv1.MetricObservation{{}, {Values: []*setpointv1.MetricValue{{Value: "300", Timestamp: timestamppb.Now()}}}},
	}
	for i := range 10 {
		name := fmt.Sprint("web-7d4b9-", i)
		req.Pods = append(req.Pods, &setpointv1.Pod{Name: name, Phase: "Running", StartTime: timestamppb.Now(),
			Ready: &setpointv1.PodReadyCondition{Status: "True", LastTransitionTime: timestamppb.Now()},
			Containers: []*setpointv1.Container{
				{Name: "app", Requests: map[string]string{"cpu": "500m", "memory": "512Mi"}},
				{Name: "istio-proxy", Requests: map[string]string{"cpu": "100m", "memory": "128Mi"}}}})
		req.ResourceMetrics.Items = append(req.ResourceMetrics.Items, &setpointv1.PodMetrics{Pod: name, Timestamp: timestamppb.Now(), Window: durationpb.New(30 * time.Second),
			Containers: []*setpointv1.ContainerMetrics{
				{Name: "app", Usage: map[string]string{"cpu": "310m", "memory": "277Mi"}},
				{Name: "istio-proxy", Usage: map[string]string{"cpu": "20m", "memory": "60Mi"}}}})
	}
	enc, err := proto.Marshal(req)
	if err != nil {
		b.Fatal(err)
	}
	data := mem.BufferSlice{mem.SliceBuffer(enc)}
	server := NewRequest()
	for name, decode := range map[string]func(*setpointv1.RecommendRequest) error{
		"codec":           func(m *setpointv1.RecommendRequest) error { return Codec().Unmarshal(data, m) },
		"proto.Unmarshal": func(m *setpointv1.RecommendRequest) error { return proto.Unmarshal(enc, m) },
		// The server's codec, its memory given back as at the end of a call.
		"server": func(m *setpointv1.RecommendRequest) error {
			if err := server.Unmarshal(data, m); err != nil {
				return err
			}
			_, err := RejectUndecodable(context.Background(), m, nil, func(context.Context, any) (any, error) { return nil, nil })
			return err
		},
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := decode(&setpointv1.RecommendRequest{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
