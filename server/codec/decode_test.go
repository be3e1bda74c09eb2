package codec

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// fullRequest is a Recommend that sets every field the agent sends, with
// pods pods.
func fullRequest(pods int) *setpointv1.RecommendRequest {
	at := time.Date(2026, 11, 26, 12, 0, 0, 5, time.UTC)
	r := &setpointv1.RecommendRequest{
		Target:          &setpointv1.TargetKey{Cluster: "eu1", Namespace: "shop", Name: "web"},
		Spec:            &setpointv1.HorizontalPodAutoscalerSpec{MaxReplicas: 9, Metrics: []*setpointv1.MetricSpec{{Type: "Resource"}}},
		Settings:        &setpointv1.ControllerSettings{CpuInitializationPeriod: durationpb.New(time.Minute)},
		Scale:           &setpointv1.Scale{Replicas: 2, Selector: "app=web"},
		ResourceMetrics: &setpointv1.ResourceMetrics{Error: "partial"},
		Observations: []*setpointv1.MetricObservation{{Error: "none"}, {Values: []*setpointv1.MetricValue{
			{Pod: "web-0", Value: "12", Timestamp: timestamppb.New(at), Window: durationpb.New(-time.Second)}, {}}}},
	}
	for i := range pods {
		name := fmt.Sprint("web-", i)
		r.Pods = append(r.Pods, &setpointv1.Pod{Name: name, Phase: "Running", Deleting: i == 2, StartTime: timestamppb.New(at.Add(-time.Hour)),
			Ready:      &setpointv1.PodReadyCondition{Status: "True", LastTransitionTime: timestamppb.New(at)},
			Containers: []*setpointv1.Container{{Name: "app", Requests: map[string]string{"cpu": "500m", "": "x", "memory": ""}}, {Name: "init", Init: true, RestartableInit: true}, {}},
			Requests:   map[string]string{"cpu": "1"}, Overhead: map[string]string{"memory": "1Mi"}})
		r.ResourceMetrics.Items = append(r.ResourceMetrics.Items, &setpointv1.PodMetrics{Pod: name, Timestamp: timestamppb.New(at), Window: durationpb.New(30 * time.Second),
			Containers: []*setpointv1.ContainerMetrics{{Name: "app", Usage: map[string]string{"cpu": "300m"}}, {Name: "side", Usage: map[string]string{}}}})
	}
	return r
}

// field encodes the message field num holding value.
func field(num protowire.Number, value []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), value)
}

// decodeCase is an encoded request and how proto.Unmarshal and the codec
// take it.
type decodeCase struct {
	name string
	b    []byte
	// refused: proto.Unmarshal refuses it; badField: the codec names this
	// field as not UTF-8 (otherwise: a wire format error).
	refused  bool
	badField string
}

// decodeCases are requests every decoder must agree on, among them what
// the generated decoder alone would take differently from
// proto.Unmarshal.
func decodeCases(t testing.TB) []decodeCase {
	t.Helper()
	full, err := proto.MarshalOptions{Deterministic: true}.Marshal(fullRequest(3))
	if err != nil {
		t.Fatal(err)
	}
	pod := func(b []byte) []byte { return field(5, b) }              // RecommendRequest.pods
	podName := func(s string) []byte { return field(1, []byte(s)) }  // Pod.name
	requests := func(entry []byte) []byte { return field(7, entry) } // Pod.requests, a map entry
	var deep []byte
	for range 20_000 {
		deep = protowire.AppendTag(deep, 99, protowire.StartGroupType)
	}
	for range 20_000 {
		deep = protowire.AppendTag(deep, 99, protowire.EndGroupType)
	}
	// Twice a message field (merged), fields out of order.
	b, _ := proto.Marshal(&setpointv1.RecommendRequest{Pods: []*setpointv1.Pod{{Name: "a", Ready: &setpointv1.PodReadyCondition{Status: "True"}}}, ResourceMetrics: &setpointv1.ResourceMetrics{Error: "x"}})
	c, _ := proto.Marshal(&setpointv1.RecommendRequest{Target: &setpointv1.TargetKey{Name: "t"}, ResourceMetrics: &setpointv1.ResourceMetrics{Items: []*setpointv1.PodMetrics{{Pod: "a"}}}})
	return []decodeCase{
		{name: "full", b: full},
		{name: "empty", b: nil},
		{name: "merged, out of order", b: append(append(append([]byte{}, b...), c...), b...)},
		{name: "unknown field", b: protowire.AppendVarint(protowire.AppendTag(append([]byte{}, full...), 99, protowire.VarintType), 1)},
		{name: "unknown field in a pod", b: pod(protowire.AppendVarint(protowire.AppendTag(podName("a"), 99, protowire.VarintType), 1))},
		// proto.Unmarshal keeps it as an unknown field.
		{name: "known field, other wire type", b: protowire.AppendVarint(protowire.AppendTag(nil, 5, protowire.VarintType), 1)},
		// The generated decoder reads a map entry's key and value without
		// looking at their wire type; proto.Unmarshal skips them.
		{name: "map value, other wire type", b: pod(requests(append(field(1, []byte("cpu")), protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 3)...)))},
		{name: "map key, other wire type", b: pod(requests(append(protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 3), field(2, []byte("1"))...)))},
		{name: "map value, other wire type, then a bad name", b: append(pod(requests(protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 3))), pod(podName("\xff"))...), refused: true, badField: "pods[1].name"},
		{name: "not UTF-8", b: pod(podName("web-\xff")), refused: true, badField: "pods[0].name"},
		{name: "not UTF-8, second pod", b: append(pod(podName("a")), pod(podName("\xc3"))...), refused: true, badField: "pods[1].name"},
		{name: "map key not UTF-8", b: pod(requests(field(1, []byte("cp\xffu")))), refused: true, badField: "pods[0].requests"},
		{name: "not UTF-8 beside an unknown field", b: protowire.AppendVarint(protowire.AppendTag(pod(podName("\xff")), 99, protowire.VarintType), 1), refused: true, badField: "pods[0].name"},
		{name: "not protobuf", b: []byte("GET / HTTP/1.1\r\n\r\n"), refused: true},
		{name: "truncated", b: full[:len(full)/2], refused: true},
		{name: "groups nested 20,000 deep", b: deep, refused: true},
		{name: "field number past 2^29-1", b: protowire.AppendVarint(protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber+1)<<3), 1), refused: true},
		{name: "group end of another number", b: protowire.AppendTag(protowire.AppendTag(nil, 98, protowire.StartGroupType), 99, protowire.EndGroupType), refused: true},
		// The generated decoder of a Duration or Timestamp drops its
		// unknown fields.
		{name: "unknown field in a duration", b: field(3, field(2, protowire.AppendVarint(protowire.AppendTag(nil, 6, protowire.VarintType), 48)))},
		// A map entry's unknown fields, dropped by both decoders; the
		// generated one does not check their field numbers.
		{name: "unknown field in a map entry", b: pod(requests(protowire.AppendVarint(protowire.AppendTag(field(1, []byte("cpu")), 3, protowire.VarintType), 1)))},
		{name: "field number 0 in a map entry", b: pod(requests(protowire.AppendVarint(protowire.AppendVarint(field(1, []byte("cpu")), 0), 1))), refused: true},
		{name: "varint over 64 bits", b: pod(append(protowire.AppendTag(nil, 3, protowire.VarintType), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f)), refused: true},
		{name: "not UTF-8 in a pod metric", b: field(6, field(2, field(1, []byte("\xe2\x82")))), refused: true, badField: "resource_metrics.items[0].pod"},
	}
}

// TestDecode: the codec decodes every case as proto.Unmarshal does: the
// same message (but for the unknown fields of a Timestamp or Duration), or
// an error where it refuses, naming the string that is not UTF-8.
func TestDecode(t *testing.T) {
	for _, tc := range decodeCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			want := &setpointv1.RecommendRequest{}
			if err := proto.Unmarshal(tc.b, want); (err != nil) != tc.refused {
				t.Fatalf("proto.Unmarshal: %v, want refused %v", err, tc.refused)
			}
			got := &setpointv1.RecommendRequest{}
			err := Codec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(tc.b)}, got)
			switch {
			case tc.refused:
				var de *DecodeError
				if !errors.As(err, &de) || de.Field != tc.badField {
					t.Fatalf("codec: %v, want a DecodeError naming %q", err, tc.badField)
				}
			case err != nil:
				t.Fatalf("codec: %v, proto.Unmarshal decodes it", err)
			case !proto.Equal(normalized(want), normalized(got)):
				t.Fatalf("codec decoded %v, proto.Unmarshal %v", got, want)
			}
		})
	}
}

// FuzzDecodeRecommend: the codec refuses what proto.Unmarshal refuses,
// and decodes the rest into the message proto.Unmarshal makes, but for
// the unknown fields of a Timestamp or Duration (package doc); so does
// the server's decoding into a request (and resource metrics) kept from
// an earlier call of another shape.
func FuzzDecodeRecommend(f *testing.F) {
	for _, tc := range decodeCases(f) {
		f.Add(tc.b)
	}
	earlier, err := proto.Marshal(fullRequest(3))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := &setpointv1.RecommendRequest{}
		wantErr := proto.Unmarshal(b, want)
		got := &setpointv1.RecommendRequest{}
		err := Codec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, got)
		switch {
		case (err != nil) != (wantErr != nil):
			t.Fatalf("codec: %v, proto.Unmarshal: %v", err, wantErr)
		case err == nil && !proto.Equal(normalized(want), normalized(got)):
			t.Fatalf("codec decoded %v, proto.Unmarshal %v", got, want)
		}
		k := &keptRequest{req: &setpointv1.RecommendRequest{}}
		kept := k.req.(*setpointv1.RecommendRequest)
		if err := decodeKept(earlier, kept, nil); err != nil {
			t.Fatal(err)
		}
		k.reset()
		err = decodeKept(b, kept, k.rm)
		switch {
		case (err != nil) != (wantErr != nil):
			t.Fatalf("into a kept request: %v, proto.Unmarshal: %v", err, wantErr)
		case err == nil && !proto.Equal(normalized(want), normalized(kept)):
			t.Fatalf("decoded into a kept request %v, proto.Unmarshal %v", kept, want)
		}
	})
}

// normalized returns m without the unknown fields of its Timestamps and
// Durations, which the generated decoder drops (package doc), and with
// the tags of the others encoded in as few bytes as they take
// (proto.Unmarshal encodes them again, the generated decoder keeps them
// as they came).
func normalized(m proto.Message) proto.Message {
	var strip func(m protoreflect.Message)
	strip = func(m protoreflect.Message) {
		switch m.Descriptor().FullName() {
		case "google.protobuf.Timestamp", "google.protobuf.Duration":
			m.SetUnknown(nil)
		default:
			var u []byte
			for b := m.GetUnknown(); len(b) > 0; {
				num, typ, n := protowire.ConsumeTag(b)
				v := protowire.ConsumeFieldValue(num, typ, b[n:])
				if n < 0 || v < 0 {
					break
				}
				u = append(protowire.AppendTag(u, num, typ), b[n:n+v]...)
				b = b[n+v:]
			}
			if len(u) > 0 {
				m.SetUnknown(u)
			}
		}
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.IsMap() && fd.MapValue().Message() != nil:
				v.Map().Range(func(_ protoreflect.MapKey, v protoreflect.Value) bool { strip(v.Message()); return true })
			case fd.IsList() && fd.Message() != nil:
				for i := range v.List().Len() {
					strip(v.List().Get(i).Message())
				}
			case !fd.IsMap() && !fd.IsList() && fd.Message() != nil:
				strip(v.Message())
			}
			return true
		})
	}
	strip(m.ProtoReflect())
	return m
}

// TestMarshal: the codec encodes what proto.Unmarshal decodes into the
// same message, generated code or not.
func TestMarshal(t *testing.T) {
	for _, m := range []proto.Message{fullRequest(3), fullRequest(300), &durationpb.Duration{Seconds: 5}} {
		data, err := Codec().Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		again := m.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(data.Materialize(), again); err != nil || !proto.Equal(m, again) {
			t.Errorf("%T: decoded %v (%v)", m, again, err)
		}
		data.Free()
	}
}

// rawBytes is a request or response kept as bytes by rawCodec.
type rawBytes []byte

// rawCodec sends rawBytes as they are.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*rawBytes))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*rawBytes) = data.Materialize()
	return nil
}
func (rawCodec) Name() string { return "raw" }

// echo is an AutoscalerService that answers a Recommend with its
// target's name as the decision id, and a Watch with one event.
type echo struct {
	setpointv1.UnimplementedAutoscalerServiceServer
}

func (echo) Recommend(_ context.Context, r *setpointv1.RecommendRequest) (*setpointv1.RecommendResponse, error) {
	return &setpointv1.RecommendResponse{Decision: &setpointv1.Decision{DecisionId: r.GetTarget().GetName()}}, nil
}

func (echo) Watch(r *setpointv1.WatchRequest, s grpc.ServerStreamingServer[setpointv1.WatchResponse]) error {
	return s.Send(&setpointv1.WatchResponse{})
}

// TestServerAnswersUndecodable: over a real listener, a server built with
// DecodeOptions and Registrar answers requests the codec refuses
// InvalidArgument, naming the field that is not UTF-8, after the
// interceptors before RejectUndecodable saw the call and before the
// handler; it answers the others from the message proto.Unmarshal makes.
func TestServerAnswersUndecodable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		seen []string
	)
	first := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		mu.Lock()
		seen = append(seen, info.FullMethod)
		mu.Unlock()
		return h(ctx, req)
	}
	srv := grpc.NewServer(append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(first)}, DecodeOptions()...)...)
	setpointv1.RegisterAutoscalerServiceServer(Registrar(srv), echo{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	recommend := setpointv1.AutoscalerService_Recommend_FullMethodName
	for _, tc := range decodeCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			in, out := rawBytes(tc.b), rawBytes(nil)
			err := conn.Invoke(t.Context(), recommend, &in, &out)
			mu.Lock()
			if len(seen) != 1 || seen[0] != recommend {
				t.Errorf("interceptor before RejectUndecodable saw %v", seen)
			}
			mu.Unlock()
			if tc.refused {
				msg := status.Convert(err).Message()
				if status.Code(err) != codes.InvalidArgument || !strings.Contains(msg, "does not decode") || !strings.Contains(msg, tc.badField) {
					t.Fatalf("got %v, want InvalidArgument naming %q", err, tc.badField)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := &setpointv1.RecommendRequest{}
			_ = proto.Unmarshal(tc.b, want)
			resp := &setpointv1.RecommendResponse{}
			if err := proto.Unmarshal(out, resp); err != nil || resp.GetDecision().GetDecisionId() != want.GetTarget().GetName() {
				t.Fatalf("answered %v (%v), want the target name %q", resp, err, want.GetTarget().GetName())
			}
		})
	}
	// A stream's message.
	desc := &grpc.StreamDesc{StreamName: "Watch", ServerStreams: true}
	for _, tc := range []struct {
		b    []byte
		code codes.Code
	}{{b: field(1, field(1, []byte("eu1"))), code: codes.OK}, {b: field(1, field(1, []byte("\xff"))), code: codes.InvalidArgument}} {
		s, err := conn.NewStream(t.Context(), desc, setpointv1.AutoscalerService_Watch_FullMethodName)
		if err != nil {
			t.Fatal(err)
		}
		in := rawBytes(tc.b)
		if err := s.SendMsg(&in); err != nil {
			t.Fatal(err)
		}
		_ = s.CloseSend()
		var out rawBytes
		if err := s.RecvMsg(&out); status.Code(err) != tc.code {
			t.Errorf("watch %q: %v, want %v", tc.b, err, tc.code)
		}
	}
}

// BenchmarkDecodeRecommend decodes an agent's usual Recommend (10 pods of
// two containers, two metrics) with the codec (generated decoder and its
// check), with its check alone, with the generated decoder alone, with proto.Unmarshal, and as
// the server does (through a decoding, into a fresh request and into one
// kept across calls).
func BenchmarkDecodeRecommend(b *testing.B) {
	enc, err := proto.Marshal(agentRequest())
	if err != nil {
		b.Fatal(err)
	}
	data := mem.BufferSlice{mem.SliceBuffer(enc)}
	reused := &setpointv1.RecommendRequest{}
	kept := &keptRequest{req: reused}
	recommendDescriptor := reused.ProtoReflect().Descriptor()
	for _, bc := range []struct {
		name   string
		decode func(*setpointv1.RecommendRequest) error
	}{
		{"codec", func(m *setpointv1.RecommendRequest) error { return Codec().Unmarshal(data, m) }},
		{"check", func(m *setpointv1.RecommendRequest) error { _, err := check(enc, recommendDescriptor); return err }},
		{"UnmarshalVT", func(m *setpointv1.RecommendRequest) error { return m.UnmarshalVT(enc) }},
		{"proto.Unmarshal", func(m *setpointv1.RecommendRequest) error { return proto.Unmarshal(enc, m) }},
		{"server", func(m *setpointv1.RecommendRequest) error {
			d := &decoding{msg: m}
			if err := Codec().Unmarshal(data, d); err != nil {
				return err
			}
			return d.err
		}},
		{"server-reused", func(*setpointv1.RecommendRequest) error {
			// As the server decodes a Recommend: into a request (and
			// resource metrics) kept from an earlier call, cleared by
			// keptRequest.reset (decodeChecked).
			d := &decoding{msg: reused, rm: kept.rm}
			err := Codec().Unmarshal(data, d)
			kept.reset()
			if err != nil {
				return err
			}
			return d.err
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				if err := bc.decode(&setpointv1.RecommendRequest{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// agentRequest is an agent's usual Recommend: 10 pods of two containers,
// two metrics.
func agentRequest() *setpointv1.RecommendRequest {
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
	return req
}

// cpuTime is the CPU time (user and system) this process has used, in
// ns: what a benchmark costs on a machine other work keeps busy, where
// its wall time also counts the waits for a core.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
