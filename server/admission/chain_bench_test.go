package admission

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"testing"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/budget"
	"github.com/setpointhq/setpoint/server/fairness"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// BenchmarkUnaryChain runs a Recommend of 10 pods through the server's
// unary interceptor chain, composed as grpc-go composes it, to a handler
// that answers at once: what the chain itself costs a call (the server's
// defaults, no authentication, a logger that discards).
func BenchmarkUnaryChain(b *testing.B) {
	o := Config{
		Bounds: fairness.Bounds{Slots: fairness.DefaultFairSlots, MaxRunning: fairness.DefaultMaxRunningPerPrincipal,
			MaxCalls: fairness.DefaultMaxCallsPerPrincipal, MaxBytes: fairness.DefaultMaxBytesPerPrincipal,
			Simulates: max(1, runtime.GOMAXPROCS(0)/2), MaxSimulates: fairness.DefaultMaxSimulatesPerPrincipal,
			MaxStreams: fairness.DefaultMaxStreamsPerPrincipal},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	fair := newFairness(o, func(string) {})
	unary, _ := chainInterceptors(chainConfig{
		metrics: grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram()),
		log:     o.Logger,
		guard:   &guard{audit: auditor{log: o.Logger}},
		// The server's defaults (package server's Options).
		limits: RequestLimits{MaxPods: 10000, MaxMetrics: 50,
			Budgets: budget.Budgets{MaxString: budget.DefaultMaxStringBytes, MaxEntries: budget.DefaultMaxListEntries, MaxSpec: budget.DefaultMaxSpecBytes}},
		inFlight: make(chan struct{}, 256),
		fair:     fair,
		refused:  func(string) {},
	})
	chained := composeUnary(unary)
	req := &setpointv1.RecommendRequest{
		Target: &setpointv1.TargetKey{Cluster: "eu1", Namespace: "shop", Name: "web"},
		Spec: &setpointv1.HorizontalPodAutoscalerSpec{MaxReplicas: 40, Metrics: []*setpointv1.MetricSpec{{Type: "Resource",
			Resource: &setpointv1.ResourceMetricSource{Name: "cpu", Target: &setpointv1.MetricTarget{Type: "Utilization", AverageUtilization: proto.Int32(60)}}}}},
		Scale: &setpointv1.Scale{Replicas: 10, Selector: "app=web"}, ResourceMetrics: &setpointv1.ResourceMetrics{},
		Observations: []*setpointv1.MetricObservation{{}},
	}
	at := timestamppb.New(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	for i := range 10 {
		name := fmt.Sprint("web-7d4b9-", i)
		req.Pods = append(req.Pods, &setpointv1.Pod{Name: name, Phase: "Running", StartTime: at,
			Ready:      &setpointv1.PodReadyCondition{Status: "True", LastTransitionTime: at},
			Containers: []*setpointv1.Container{{Name: "app", Requests: map[string]string{"cpu": "500m", "memory": "512Mi"}}}})
		req.ResourceMetrics.Items = append(req.ResourceMetrics.Items, &setpointv1.PodMetrics{Pod: name, Timestamp: at,
			Containers: []*setpointv1.ContainerMetrics{{Name: "app", Usage: map[string]string{"cpu": "310m", "memory": "277Mi"}}}})
	}
	resp := &setpointv1.RecommendResponse{Decision: &setpointv1.Decision{DecisionId: "0123456789abcdef", DesiredReplicas: 10}}
	info := &grpc.UnaryServerInfo{FullMethod: setpointv1.AutoscalerService_Recommend_FullMethodName}
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}})
	size := new(call) // as the stats handler notes it (tap.go)
	size.bytes.Store(int64(proto.Size(req)))
	size.known.Store(true)
	ctx = context.WithValue(ctx, callKey{}, size)
	handler := func(context.Context, any) (any, error) { return resp, nil }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := chained(ctx, req, info, handler); err != nil {
			b.Fatal(err)
		}
	}
}

// composeUnary composes interceptors, outermost first, as
// grpc.ChainUnaryInterceptor does.
func composeUnary(ints []grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		var next func(i int) grpc.UnaryHandler
		next = func(i int) grpc.UnaryHandler {
			if i == len(ints) {
				return handler
			}
			return func(ctx context.Context, req any) (any, error) { return ints[i](ctx, req, info, next(i+1)) }
		}
		return next(0)(ctx, req)
	}
}
