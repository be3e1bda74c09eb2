package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/grpc/mem"
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
// proto.Unmarshal does, and leaves the others to it; Codec gives the same
// message or error as proto.Unmarshal for all.
func TestDecodeRecommend(t *testing.T) {
	fast, slow := decodeSeeds(t)
	for i, b := range append(fast, slow...) {
		want := &setpointv1.RecommendRequest{}
		wantErr := proto.Unmarshal(b, want)
		got := &setpointv1.RecommendRequest{}
		handled := decodeRecommend(b, got)
		if handled != (i < len(fast)) {
			t.Errorf("seed %d: decoded by hand %v, want %v", i, handled, i < len(fast))
		}
		if handled {
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" || wantErr != nil {
				t.Errorf("seed %d: proto.Unmarshal error %v, (-proto.Unmarshal +hand):\n%s", i, wantErr, diff)
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
	}
}

// FuzzDecodeRecommend: whatever the hand decoder decodes, it decodes as
// proto.Unmarshal does.
func FuzzDecodeRecommend(f *testing.F) {
	fast, slow := decodeSeeds(f)
	for _, b := range append(fast, slow...) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := &setpointv1.RecommendRequest{}
		if !decodeRecommend(b, got) {
			return
		}
		want := &setpointv1.RecommendRequest{}
		if err := proto.Unmarshal(b, want); err != nil {
			t.Fatalf("decoded by hand what proto.Unmarshal refuses (%v): %v", err, got)
		}
		if !proto.Equal(want, got) {
			t.Fatalf("proto.Unmarshal %v, by hand %v", want, got)
		}
	})
}

// BenchmarkDecodeRecommend decodes an agent's usual Recommend (10 pods of
// two containers, two metrics) with Codec and with proto.Unmarshal.
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
	for name, decode := range map[string]func(*setpointv1.RecommendRequest) error{
		"codec":           func(m *setpointv1.RecommendRequest) error { return Codec().Unmarshal(data, m) },
		"proto.Unmarshal": func(m *setpointv1.RecommendRequest) error { return proto.Unmarshal(enc, m) },
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
