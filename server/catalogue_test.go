package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/testkit"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// hostile is one entry of the bad-input catalogue.
type hostile struct {
	name string
	// call makes the request; resp is the response when err is nil.
	call func(ctx context.Context, h *hostileClient) (resp proto.Message, err error)
	// code is the status the server must answer.
	code codes.Code
	// field, for InvalidArgument, is a field the BadRequest detail must
	// name.
	field string
	// check, for accepted requests, checks the response.
	check func(t *testing.T, resp proto.Message)
}

// hostileClient is what catalogue entries call through: the typed client,
// and the connection for raw bytes the typed client would refuse to send.
type hostileClient struct {
	c    setpointv1.AutoscalerServiceClient
	conn *grpc.ClientConn
}

// raw sends b as the request of method, bypassing the client's marshalling.
func (h *hostileClient) raw(ctx context.Context, method string, b []byte) (proto.Message, error) {
	var out rawBytes
	err := h.conn.Invoke(ctx, method, rawBytes(b), &out, grpc.ForceCodecV2(rawCodec{}))
	return nil, err
}

// recommend sends a Recommend request built from the well-formed request
// for "web" (3 pods, scaling up to 5) and changed by edit.
func recommendWith(edit func(r *setpointv1.RecommendRequest)) func(context.Context, *hostileClient) (proto.Message, error) {
	return func(ctx context.Context, h *hostileClient) (proto.Message, error) {
		r := request("web", 3, t0)
		edit(r)
		return h.c.Recommend(ctx, r)
	}
}

func observeWith(r *setpointv1.ObserveRequest) func(context.Context, *hostileClient) (proto.Message, error) {
	return func(ctx context.Context, h *hostileClient) (proto.Message, error) { return h.c.Observe(ctx, r) }
}

// simulateWith sends a Simulate request of one step made from the
// well-formed Recommend request and changed by edit.
func simulateWith(edit func(r *setpointv1.SimulateRequest)) func(context.Context, *hostileClient) (proto.Message, error) {
	return func(ctx context.Context, h *hostileClient) (proto.Message, error) {
		rr := request("web", 3, t0)
		r := &setpointv1.SimulateRequest{Spec: rr.Spec, Steps: []*setpointv1.SimulateStep{{
			Time: timestamppb.New(t0), Scale: rr.Scale, Pods: rr.Pods, ResourceMetrics: rr.ResourceMetrics, Observations: rr.Observations,
		}}}
		edit(r)
		return h.c.Simulate(ctx, r)
	}
}

// observeDecision decides for target name, then reports an applied
// rescale of the decision id made by id from the decision's own.
func observeDecision(name string, id func(own string) string) func(context.Context, *hostileClient) (proto.Message, error) {
	return func(ctx context.Context, h *hostileClient) (proto.Message, error) {
		resp, err := h.c.Recommend(ctx, request(name, 3, t0))
		if err != nil {
			return nil, err
		}
		d := resp.GetDecision()
		return h.c.Observe(ctx, &setpointv1.ObserveRequest{Target: key(name), DecisionId: id(d.GetDecisionId()),
			Change: &setpointv1.ObserveRequest_Applied{Applied: &setpointv1.AppliedChange{From: 3, To: d.GetDesiredReplicas()}}})
	}
}

// watchWith opens a Watch and returns the error of its first message.
func watchWith(r *setpointv1.WatchRequest) func(context.Context, *hostileClient) (proto.Message, error) {
	return func(ctx context.Context, h *hostileClient) (proto.Message, error) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		stream, err := h.c.Watch(ctx, r)
		if err != nil {
			return nil, err
		}
		return stream.Recv()
	}
}

// externalWithExpressions is an External metric (target value 10) whose
// selector has n expressions of k values each.
func externalWithExpressions(n, k int) *setpointv1.MetricSpec {
	sel := &setpointv1.LabelSelector{}
	for i := range n {
		req := &setpointv1.LabelSelectorRequirement{Key: fmt.Sprintf("k%d", i), Operator: "In"}
		for j := range k {
			req.Values = append(req.Values, fmt.Sprint("v", j))
		}
		sel.MatchExpressions = append(sel.MatchExpressions, req)
	}
	return &setpointv1.MetricSpec{Type: "External", External: &setpointv1.ExternalMetricSource{
		Metric: &setpointv1.MetricIdentifier{Name: "queue", Selector: sel}, Target: &setpointv1.MetricTarget{Type: "Value", Value: "10"}}}
}

// wantDesired checks a RecommendResponse's decided replica count.
func wantDesired(n int32) func(*testing.T, proto.Message) {
	return func(t *testing.T, m proto.Message) {
		t.Helper()
		if got := m.(*setpointv1.RecommendResponse).GetDecision().GetDesiredReplicas(); got != n {
			t.Errorf("desired replicas = %d, want %d", got, n)
		}
	}
}

// catalogue is the bad-input catalogue: malformed and hostile requests and
// what the server must answer. Some inputs look wrong but are accepted on
// purpose, as the Kubernetes controller accepts them; those entries assert
// the controller's behaviour.
func catalogue() []hostile {
	behavior := func(r *setpointv1.RecommendRequest) *setpointv1.ScalingRules {
		r.Spec.Behavior.ScaleUp = &setpointv1.ScalingRules{Policies: []*setpointv1.ScalingPolicy{{Type: "Pods", Value: 4, PeriodSeconds: 60}}}
		return r.Spec.Behavior.ScaleUp
	}
	cpu := func(r *setpointv1.RecommendRequest) *setpointv1.MetricTarget {
		return r.Spec.Metrics[0].Resource.Target
	}
	long := strings.Repeat("a", 254)
	recommendRaw := setpointv1.AutoscalerService_Recommend_FullMethodName
	valid, _ := proto.Marshal(request("web", 3, t0))
	return []hostile{
		// Identity.
		{name: "no target", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Target = nil }), code: codes.InvalidArgument, field: "target"},
		{name: "empty cluster", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Target.Cluster = "" }), code: codes.InvalidArgument, field: "target.cluster"},
		{name: "empty namespace", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Target.Namespace = "" }), code: codes.InvalidArgument, field: "target.namespace"},
		{name: "empty name", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Target.Name = "" }), code: codes.InvalidArgument, field: "target.name"},
		{name: "slash in name", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Target.Name = "a/b" }), code: codes.InvalidArgument, field: "target.name"},
		{name: "NUL in cluster", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Target.Cluster = "eu\x001" }), code: codes.InvalidArgument, field: "target.cluster"},
		{name: "name of 254 bytes", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Target.Name = long }), code: codes.InvalidArgument, field: "target.name"},
		// Structure.
		{name: "no spec", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Spec = nil }), code: codes.InvalidArgument, field: "spec"},
		{name: "no scale", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Scale = nil }), code: codes.InvalidArgument, field: "scale"},
		{name: "no metrics", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Spec.Metrics = nil }), code: codes.InvalidArgument, field: "spec.metrics"},
		{name: "observations fewer than metrics", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Observations = nil }), code: codes.InvalidArgument, field: "observations"},
		// Replica bounds.
		{name: "min > max", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			r.Spec.MinReplicas = testkit.Ptr[int32](10)
			r.Spec.MaxReplicas = 5
		}), code: codes.InvalidArgument, field: "spec.min_replicas"},
		{name: "max 0", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Spec.MaxReplicas = 0 }), code: codes.InvalidArgument, field: "spec.max_replicas"},
		{name: "negative max", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Spec.MaxReplicas = math.MinInt32 }), code: codes.InvalidArgument, field: "spec.max_replicas"},
		{name: "negative min", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Spec.MinReplicas = testkit.Ptr[int32](-1) }), code: codes.InvalidArgument, field: "spec.min_replicas"},
		{name: "min 0 without object or external metric", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Spec.MinReplicas = testkit.Ptr[int32](0) }), code: codes.InvalidArgument, field: "spec.min_replicas"},
		{name: "negative scale replicas", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Scale.Replicas = -3 }), code: codes.InvalidArgument, field: "scale.replicas"},
		{name: "negative status replicas", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Scale.StatusReplicas = math.MinInt32 }), code: codes.InvalidArgument, field: "scale.status_replicas"},
		// Huge but valid counts: clamped to max as the controller does.
		{name: "max replicas MaxInt32", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Spec.MaxReplicas = math.MaxInt32 }), code: codes.OK, check: wantDesired(5)},
		{name: "current replicas MaxInt32", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Scale.Replicas = math.MaxInt32 }), code: codes.OK, check: wantDesired(100)},
		// Metric specs.
		{name: "unknown metric type", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Spec.Metrics[0].Type = "Bogus" }), code: codes.InvalidArgument, field: "spec.metrics[0].type"},
		{name: "unknown target type", call: recommendWith(func(r *setpointv1.RecommendRequest) { cpu(r).Type = "Bogus" }), code: codes.InvalidArgument, field: "spec.metrics[0].resource.target.type"},
		{name: "utilization 0", call: recommendWith(func(r *setpointv1.RecommendRequest) { cpu(r).AverageUtilization = testkit.Ptr[int32](0) }), code: codes.InvalidArgument, field: "spec.metrics[0].resource.target.average_utilization"},
		{name: "negative utilization", call: recommendWith(func(r *setpointv1.RecommendRequest) { cpu(r).AverageUtilization = testkit.Ptr[int32](math.MinInt32) }), code: codes.InvalidArgument, field: "spec.metrics[0].resource.target.average_utilization"},
		{name: "resource metric without name", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Spec.Metrics[0].Resource.Name = "" }), code: codes.InvalidArgument, field: "spec.metrics[0].resource.name"},
		{name: "resource metric without source", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Spec.Metrics[0].Resource = nil }), code: codes.InvalidArgument, field: "spec.metrics[0].resource"},
		{name: "external metric without name", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			r.Spec.Metrics[0] = &setpointv1.MetricSpec{Type: "External", External: &setpointv1.ExternalMetricSource{
				Metric: &setpointv1.MetricIdentifier{}, Target: &setpointv1.MetricTarget{Type: "Value", Value: "10"}}}
		}), code: codes.InvalidArgument, field: "spec.metrics[0].external.metric.name"},
		{name: "object metric with two values", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			r.Spec.Metrics[0] = &setpointv1.MetricSpec{Type: "Object", Object: &setpointv1.ObjectMetricSource{
				Metric: &setpointv1.MetricIdentifier{Name: "rps"}, DescribedObject: &setpointv1.CrossVersionObjectReference{Kind: "Ingress", Name: "main"},
				Target: &setpointv1.MetricTarget{Type: "Value", Value: "10"}}}
			r.Observations = []*setpointv1.MetricObservation{{Values: []*setpointv1.MetricValue{{Value: "1"}, {Value: "2"}}}}
		}), code: codes.InvalidArgument, field: "observations[0].values"},
		// Quantities.
		{name: "quantity not a number", call: recommendWith(func(r *setpointv1.RecommendRequest) { cpu(r).Type = "AverageValue"; cpu(r).AverageValue = "lots" }), code: codes.InvalidArgument, field: "spec.metrics[0].resource.target.average_value"},
		{name: "quantity NaN", call: recommendWith(func(r *setpointv1.RecommendRequest) { cpu(r).Type = "AverageValue"; cpu(r).AverageValue = "NaN" }), code: codes.InvalidArgument, field: "spec.metrics[0].resource.target.average_value"},
		{name: "quantity Inf", call: recommendWith(func(r *setpointv1.RecommendRequest) { cpu(r).Type = "AverageValue"; cpu(r).AverageValue = "Inf" }), code: codes.InvalidArgument, field: "spec.metrics[0].resource.target.average_value"},
		{name: "negative request", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Pods[0].Containers[0].Requests["cpu"] = "-500m" }), code: codes.InvalidArgument, field: `pods[0].containers[0].requests["cpu"]`},
		{name: "request of 1e300", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Pods[0].Containers[0].Requests["cpu"] = "1e300" }), code: codes.InvalidArgument, field: `pods[0].containers[0].requests["cpu"]`},
		{name: "usage of 10^18 cores (beyond int64 milli)", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			r.ResourceMetrics.Items[0].Containers[0].Usage["cpu"] = "1E"
		}), code: codes.InvalidArgument, field: `resource_metrics.items[0].containers[0].usage["cpu"]`},
		{name: "usage at the int64 edge", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			for _, it := range r.ResourceMetrics.Items {
				it.Containers[0].Usage["cpu"] = "9P"
			}
		}), code: codes.OK, check: wantDesired(7)},
		{name: "empty resource name", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Pods[0].Containers[0].Requests[""] = "1" }), code: codes.InvalidArgument, field: "pods[0].containers[0].requests"},
		// Floating point.
		{name: "tolerance NaN", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			r.Settings = &setpointv1.ControllerSettings{Tolerance: testkit.Ptr(math.NaN())}
		}), code: codes.InvalidArgument, field: "settings.tolerance"},
		{name: "tolerance +Inf", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			r.Settings = &setpointv1.ControllerSettings{Tolerance: testkit.Ptr(math.Inf(1))}
		}), code: codes.InvalidArgument, field: "settings.tolerance"},
		{name: "tolerance negative", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			r.Settings = &setpointv1.ControllerSettings{Tolerance: testkit.Ptr(-0.1)}
		}), code: codes.InvalidArgument, field: "settings.tolerance"},
		{name: "behavior tolerance NaN", call: recommendWith(func(r *setpointv1.RecommendRequest) { behavior(r).Tolerance = "NaN" }), code: codes.InvalidArgument, field: "spec.behavior.scale_up.tolerance"},
		{name: "behavior tolerance negative", call: recommendWith(func(r *setpointv1.RecommendRequest) { behavior(r).Tolerance = "-1" }), code: codes.InvalidArgument, field: "spec.behavior.scale_up.tolerance"},
		// Behavior.
		{name: "stabilization window negative", call: recommendWith(func(r *setpointv1.RecommendRequest) { behavior(r).StabilizationWindowSeconds = testkit.Ptr[int32](-1) }), code: codes.InvalidArgument, field: "spec.behavior.scale_up.stabilization_window_seconds"},
		{name: "stabilization window over an hour", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			behavior(r).StabilizationWindowSeconds = testkit.Ptr[int32](math.MaxInt32)
		}), code: codes.InvalidArgument, field: "spec.behavior.scale_up.stabilization_window_seconds"},
		{name: "unknown select policy", call: recommendWith(func(r *setpointv1.RecommendRequest) { behavior(r).SelectPolicy = "Sometimes" }), code: codes.InvalidArgument, field: "spec.behavior.scale_up.select_policy"},
		{name: "unknown policy type", call: recommendWith(func(r *setpointv1.RecommendRequest) { behavior(r).Policies[0].Type = "Bogus" }), code: codes.InvalidArgument, field: "spec.behavior.scale_up.policies[0].type"},
		{name: "policy value negative", call: recommendWith(func(r *setpointv1.RecommendRequest) { behavior(r).Policies[0].Value = -4 }), code: codes.InvalidArgument, field: "spec.behavior.scale_up.policies[0].value"},
		{name: "policy period 0", call: recommendWith(func(r *setpointv1.RecommendRequest) { behavior(r).Policies[0].PeriodSeconds = 0 }), code: codes.InvalidArgument, field: "spec.behavior.scale_up.policies[0].period_seconds"},
		{name: "policy period over 30 minutes", call: recommendWith(func(r *setpointv1.RecommendRequest) { behavior(r).Policies[0].PeriodSeconds = 1801 }), code: codes.InvalidArgument, field: "spec.behavior.scale_up.policies[0].period_seconds"},
		// Controller settings.
		{name: "negative cpu initialization period", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			r.Settings = &setpointv1.ControllerSettings{CpuInitializationPeriod: durationpb.New(-time.Minute)}
		}), code: codes.InvalidArgument, field: "settings.cpu_initialization_period"},
		{name: "duration out of range", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			r.Settings = &setpointv1.ControllerSettings{DownscaleStabilizationWindow: &durationpb.Duration{Seconds: math.MaxInt64}}
		}), code: codes.InvalidArgument, field: "settings.downscale_stabilization_window"},
		// Pods.
		{name: "pod without name", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Pods[0].Name = "" }), code: codes.InvalidArgument, field: "pods[0].name"},
		{name: "duplicate pod names", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Pods[1].Name = r.Pods[0].Name }), code: codes.InvalidArgument, field: "pods[1].name"},
		{name: "unknown pod phase", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Pods[0].Phase = "Sleeping" }), code: codes.InvalidArgument, field: "pods[0].phase"},
		{name: "unknown ready status", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Pods[0].Ready.Status = "Maybe" }), code: codes.InvalidArgument, field: "pods[0].ready.status"},
		{name: "container without name", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Pods[0].Containers[0].Name = "" }), code: codes.InvalidArgument, field: "pods[0].containers[0].name"},
		{name: "init and restartable init", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			r.Pods[0].Containers[0].Init, r.Pods[0].Containers[0].RestartableInit = true, true
		}), code: codes.InvalidArgument, field: "pods[0].containers[0]"},
		{name: "start time after year 9999", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Pods[0].StartTime = &timestamppb.Timestamp{Seconds: 1 << 40} }), code: codes.InvalidArgument, field: "pods[0].start_time"},
		{name: "timestamp nanos out of range", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Pods[0].StartTime = &timestamppb.Timestamp{Nanos: -1} }), code: codes.InvalidArgument, field: "pods[0].start_time"},
		// Metrics.
		{name: "metrics item without pod", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.ResourceMetrics.Items[0].Pod = "" }), code: codes.InvalidArgument, field: "resource_metrics.items[0].pod"},
		{name: "negative metrics window", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.ResourceMetrics.Items[0].Window = durationpb.New(-time.Second) }), code: codes.InvalidArgument, field: "resource_metrics.items[0].window"},
		// The controller ignores metrics of pods the selector did not list.
		{name: "metrics for unknown pods are ignored", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			for i := range 5 {
				r.ResourceMetrics.Items = append(r.ResourceMetrics.Items, &setpointv1.PodMetrics{Pod: fmt.Sprintf("ghost-%d", i),
					Timestamp: timestamppb.New(t0.Add(-15 * time.Second)), Window: durationpb.New(30 * time.Second),
					Containers: []*setpointv1.ContainerMetrics{{Name: "app", Usage: map[string]string{"cpu": "100"}}}})
			}
		}), code: codes.OK, check: wantDesired(5)},
		// A selector the API server would not parse is the controller's
		// InvalidSelector condition, not a request error.
		{name: "unparsable selector", call: recommendWith(func(r *setpointv1.RecommendRequest) { r.Scale.Selector = "app in (" }), code: codes.OK, check: func(t *testing.T, m proto.Message) {
			if !hasCondition(m.(*setpointv1.RecommendResponse).GetDecision().GetStatus(), "ScalingActive", "False", "InvalidSelector") {
				t.Errorf("status %v lacks ScalingActive=False InvalidSelector", m.(*setpointv1.RecommendResponse).GetDecision().GetStatus())
			}
		}},
		{name: "selector of 100k nested parentheses", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			r.Scale.Selector = "app in " + strings.Repeat("(", 100_000) + strings.Repeat(")", 100_000)
		}), code: codes.InvalidArgument, field: "scale.selector"},
		{name: "selector of 2k nested parentheses", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			r.Scale.Selector = "app in " + strings.Repeat("(", 2000) + strings.Repeat(")", 2000)
		}), code: codes.OK, check: func(t *testing.T, m proto.Message) {
			if !hasCondition(m.(*setpointv1.RecommendResponse).GetDecision().GetStatus(), "ScalingActive", "False", "InvalidSelector") {
				t.Errorf("status lacks ScalingActive=False InvalidSelector")
			}
		}},
		{name: "label selector with 10k expressions", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			r.Spec.Metrics[0] = externalWithExpressions(10_000, 2)
			r.Observations = []*setpointv1.MetricObservation{{Values: []*setpointv1.MetricValue{{Value: "30", Timestamp: timestamppb.New(t0)}}}}
		}), code: codes.InvalidArgument, field: "spec.metrics[0].external.metric.selector.match_expressions"},
		{name: "label selector with 256 expressions (-max-list-entries)", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			r.Spec.Metrics[0] = externalWithExpressions(server.DefaultMaxListEntries, 2)
			r.Observations = []*setpointv1.MetricObservation{{Values: []*setpointv1.MetricValue{{Value: "30", Timestamp: timestamppb.New(t0)}}}}
		}), code: codes.OK, check: wantDesired(7)},
		{name: "label selector value of 5 MiB", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			r.Spec.Metrics[0] = externalWithExpressions(1, 1)
			r.Spec.Metrics[0].External.Metric.Selector.MatchExpressions[0].Values[0] = strings.Repeat("v", 5<<20)
		}), code: codes.InvalidArgument, field: "spec.metrics[0].external.metric.selector.match_expressions[0].values[0]"},
		{name: "match_labels value of 5 KiB", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			r.Spec.Metrics[0] = externalWithExpressions(0, 0)
			r.Spec.Metrics[0].External.Metric.Selector.MatchLabels = map[string]string{"app": strings.Repeat("v", 5<<10)}
		}), code: codes.InvalidArgument, field: `spec.metrics[0].external.metric.selector.match_labels["app"]`},
		{name: "match_labels of 1k entries", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			r.Spec.Metrics[0] = externalWithExpressions(0, 0)
			r.Spec.Metrics[0].External.Metric.Selector.MatchLabels = map[string]string{}
			for i := range 1000 {
				r.Spec.Metrics[0].External.Metric.Selector.MatchLabels[fmt.Sprint("k", i)] = "v"
			}
		}), code: codes.InvalidArgument, field: "spec.metrics[0].external.metric.selector.match_labels"},
		{name: "spec over the stored-bytes budget (50 metrics of 4 KiB selectors)", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			r.Spec.Metrics = nil
			for range 50 {
				m := externalWithExpressions(1, 1)
				m.External.Metric.Selector.MatchExpressions[0].Values[0] = strings.Repeat("v", 4000)
				r.Spec.Metrics = append(r.Spec.Metrics, m)
			}
		}), code: codes.InvalidArgument, field: "spec"},
		{name: "metric name of 5 KiB", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			r.Spec.Metrics[0] = externalWithExpressions(0, 0)
			r.Spec.Metrics[0].External.Metric.Name = strings.Repeat("n", 5<<10)
		}), code: codes.InvalidArgument, field: "spec.metrics[0].external.metric.name"},
		{name: "pod with 1k containers", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			for range 1000 {
				r.Pods[0].Containers = append(r.Pods[0].Containers, &setpointv1.Container{Name: "c"})
			}
		}), code: codes.InvalidArgument, field: "pods[0].containers"},
		{name: "failed message of 1 MiB", call: observeWith(&setpointv1.ObserveRequest{
			Target: &setpointv1.TargetKey{Cluster: "c1", Namespace: "default", Name: "web"}, DecisionId: "d",
			Change: &setpointv1.ObserveRequest_Failed{Failed: &setpointv1.FailedChange{To: 5, Message: strings.Repeat("m", 1<<20)}},
		}), code: codes.InvalidArgument, field: "failed.message"},
		{name: "metric error of 1 MiB", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			r.Observations[0].Error = strings.Repeat("e", 1<<20)
		}), code: codes.InvalidArgument, field: "observations[0].error"},
		{name: "watch cluster of 1 MiB", call: watchWith(&setpointv1.WatchRequest{Cluster: strings.Repeat("c", 1<<20)}), code: codes.InvalidArgument, field: "cluster"},
		{name: "simulate metric value of 1 MiB", call: simulateWith(func(r *setpointv1.SimulateRequest) {
			r.Steps[0].MetricValues = []string{strings.Repeat("1", 1<<20)}
		}), code: codes.InvalidArgument, field: "steps[0].metric_values[0]"},
		{name: "simulate pod model requests of 1k entries", call: simulateWith(func(r *setpointv1.SimulateRequest) {
			r.PodModel = &setpointv1.PodModel{InitialReplicas: 1, Requests: map[string]string{}}
			for i := range 1000 {
				r.PodModel.Requests[fmt.Sprint("r", i)] = "1"
			}
		}), code: codes.InvalidArgument, field: "pod_model.requests"},
		{name: "list page token of 1 MiB", call: func(ctx context.Context, h *hostileClient) (proto.Message, error) {
			return h.c.ListTargets(ctx, &setpointv1.ListTargetsRequest{PageToken: strings.Repeat("t", 1<<20)})
		}, code: codes.InvalidArgument, field: "page_token"},
		// Size.
		{name: "10k pods (-max-pods-per-request's default)", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			big := request("web", server.DefaultMaxPodsPerRequest, t0)
			r.Pods, r.ResourceMetrics = big.Pods, big.ResourceMetrics
			r.Spec.MaxReplicas = 1_000_000
			r.Scale.Replicas, r.Scale.StatusReplicas = server.DefaultMaxPodsPerRequest, server.DefaultMaxPodsPerRequest
		}), code: codes.OK, check: wantDesired(16_000)},
		{name: "100k pods (over -max-pods-per-request)", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			big := request("web", 100_000, t0)
			r.Pods, r.ResourceMetrics = big.Pods, big.ResourceMetrics
			r.Spec.MaxReplicas = 1_000_000
			r.Scale.Replicas, r.Scale.StatusReplicas = 100_000, 100_000
		}), code: codes.InvalidArgument, field: "pods"},
		{name: "oversized message (17 MiB)", call: recommendWith(func(r *setpointv1.RecommendRequest) {
			r.Scale.Selector = "app=" + strings.Repeat("x", 17<<20)
		}), code: codes.ResourceExhausted},
		// Bytes the typed client would not send.
		{name: "invalid UTF-8 in a string", call: func(ctx context.Context, h *hostileClient) (proto.Message, error) {
			b := protowire.AppendTag(nil, 1, protowire.BytesType) // target
			inner := protowire.AppendTag(nil, 1, protowire.BytesType)
			inner = protowire.AppendBytes(inner, []byte("eu\xff\xfe1"))
			b = protowire.AppendBytes(b, inner)
			return h.raw(ctx, recommendRaw, b)
		}, code: codes.InvalidArgument},
		{name: "not protobuf", call: func(ctx context.Context, h *hostileClient) (proto.Message, error) {
			return h.raw(ctx, recommendRaw, []byte("GET / HTTP/1.1\r\n\r\n"))
		}, code: codes.InvalidArgument},
		{name: "truncated message", call: func(ctx context.Context, h *hostileClient) (proto.Message, error) {
			return h.raw(ctx, recommendRaw, valid[:len(valid)/2])
		}, code: codes.InvalidArgument},
		{name: "100k nested unknown groups", call: func(ctx context.Context, h *hostileClient) (proto.Message, error) {
			var b []byte
			for range 100_000 {
				b = protowire.AppendTag(b, 99, protowire.StartGroupType)
			}
			for range 100_000 {
				b = protowire.AppendTag(b, 99, protowire.EndGroupType)
			}
			return h.raw(ctx, recommendRaw, b)
		}, code: codes.InvalidArgument},
		{name: "unknown fields are ignored", call: func(ctx context.Context, h *hostileClient) (proto.Message, error) {
			b := protowire.AppendTag(append([]byte(nil), valid...), 9999, protowire.BytesType)
			b = protowire.AppendBytes(b, []byte("from a newer client"))
			return h.raw(ctx, recommendRaw, b)
		}, code: codes.OK},
		// Observe.
		{name: "observe without change", call: observeWith(&setpointv1.ObserveRequest{Target: key("web")}), code: codes.InvalidArgument, field: "change"},
		{name: "observe without target", call: observeWith(&setpointv1.ObserveRequest{Change: &setpointv1.ObserveRequest_External{External: &setpointv1.ExternalChange{From: 1, To: 2}}}), code: codes.InvalidArgument, field: "target"},
		{name: "applied without decision", call: observeWith(&setpointv1.ObserveRequest{Target: key("web"), Change: &setpointv1.ObserveRequest_Applied{Applied: &setpointv1.AppliedChange{From: 1, To: 2}}}), code: codes.InvalidArgument, field: "decision_id"},
		{name: "applied from negative", call: observeWith(&setpointv1.ObserveRequest{Target: key("web"), DecisionId: "d", Change: &setpointv1.ObserveRequest_Applied{Applied: &setpointv1.AppliedChange{From: -1, To: 2}}}), code: codes.InvalidArgument, field: "applied.from"},
		{name: "failed to negative", call: observeWith(&setpointv1.ObserveRequest{Target: key("web"), DecisionId: "d", Change: &setpointv1.ObserveRequest_Failed{Failed: &setpointv1.FailedChange{To: math.MinInt32}}}), code: codes.InvalidArgument, field: "failed.to"},
		{name: "external to negative", call: observeWith(&setpointv1.ObserveRequest{Target: key("web"), Change: &setpointv1.ObserveRequest_External{External: &setpointv1.ExternalChange{From: 1, To: -2}}}), code: codes.InvalidArgument, field: "external.to"},
		{name: "applied of a decision never issued", call: observeDecision("forged", func(string) string { return "d-forged" }), code: codes.InvalidArgument, field: "decision_id"},
		{name: "applied of another target's decision", call: func(ctx context.Context, h *hostileClient) (proto.Message, error) {
			other, err := h.c.Recommend(ctx, request("other-target", 3, t0))
			if err != nil {
				return nil, err
			}
			return observeDecision("mine", func(string) string { return other.GetDecision().GetDecisionId() })(ctx, h)
		}, code: codes.InvalidArgument, field: "decision_id"},
		{name: "applied of the target's own decision", call: observeDecision("own", func(id string) string { return id }), code: codes.OK},
		{name: "max = replicas = MaxInt32 without behavior (the legacy limit saturates)", call: func(ctx context.Context, h *hostileClient) (proto.Message, error) {
			edge := func() *setpointv1.RecommendRequest {
				r := request("int32-edge", 3, t0)
				r.Spec.Behavior, r.Spec.MaxReplicas = nil, math.MaxInt32
				r.Scale.Replicas, r.Scale.StatusReplicas = math.MaxInt32, math.MaxInt32
				return r
			}
			resp, err := h.c.Recommend(ctx, edge())
			if err != nil || resp.GetDecision().GetDesiredReplicas() < 0 {
				return resp, fmt.Errorf("first decision %v: %w", resp.GetDecision().GetDesiredReplicas(), err)
			}
			return h.c.Recommend(ctx, edge()) // later calls for the target are served too
		}, code: codes.OK, check: func(t *testing.T, m proto.Message) {
			if d := m.(*setpointv1.RecommendResponse).GetDecision(); d.GetDesiredReplicas() < 1 {
				t.Errorf("desired replicas %d, want within [1, MaxInt32]", d.GetDesiredReplicas())
			}
		}},
		{name: "observe of an unknown target", call: observeWith(&setpointv1.ObserveRequest{Target: key("nobody"), Change: &setpointv1.ObserveRequest_External{External: &setpointv1.ExternalChange{From: 1, To: 2}}}), code: codes.NotFound},
		{name: "failed for a decision that is not the last", call: func(ctx context.Context, h *hostileClient) (proto.Message, error) {
			if _, err := h.c.Recommend(ctx, request("stale", 2, t0)); err != nil {
				return nil, err
			}
			return h.c.Observe(ctx, &setpointv1.ObserveRequest{Target: key("stale"), DecisionId: "not-the-last", Change: &setpointv1.ObserveRequest_Failed{Failed: &setpointv1.FailedChange{To: 3, Message: "forbidden"}}})
		}, code: codes.FailedPrecondition},
		// Simulate and Watch.
		{name: "simulate without spec", call: simulateWith(func(r *setpointv1.SimulateRequest) { r.Spec = nil }), code: codes.InvalidArgument, field: "spec"},
		{name: "simulate without steps", call: simulateWith(func(r *setpointv1.SimulateRequest) { r.Steps = nil }), code: codes.InvalidArgument, field: "steps"},
		{name: "simulate with 100k steps", call: simulateWith(func(r *setpointv1.SimulateRequest) {
			for i := range 100_000 {
				r.Steps = append(r.Steps, &setpointv1.SimulateStep{Time: timestamppb.New(t0.Add(time.Duration(i+1) * time.Second))})
			}
		}), code: codes.InvalidArgument, field: "steps"},
		{name: "simulate steps out of order", call: simulateWith(func(r *setpointv1.SimulateRequest) {
			r.Steps = append(r.Steps, &setpointv1.SimulateStep{Time: timestamppb.New(t0.Add(-time.Minute))})
		}), code: codes.InvalidArgument, field: "steps[1].time"},
		{name: "simulate a spec edit with max below min", call: simulateWith(func(r *setpointv1.SimulateRequest) {
			edit := proto.Clone(r.Spec).(*setpointv1.HorizontalPodAutoscalerSpec)
			edit.MaxReplicas = 0
			r.Steps = append(r.Steps, &setpointv1.SimulateStep{Time: timestamppb.New(t0.Add(time.Minute)), Spec: edit,
				Scale: r.Steps[0].Scale, Pods: r.Steps[0].Pods, ResourceMetrics: r.Steps[0].ResourceMetrics, Observations: r.Steps[0].Observations})
		}), code: codes.InvalidArgument, field: "steps[1].spec.max_replicas"},
		{name: "simulate a spec edit whose metrics the observations do not follow", call: simulateWith(func(r *setpointv1.SimulateRequest) {
			edit := proto.Clone(r.Spec).(*setpointv1.HorizontalPodAutoscalerSpec)
			edit.Metrics = append(edit.Metrics, edit.Metrics[0])
			r.Steps = append(r.Steps, &setpointv1.SimulateStep{Time: timestamppb.New(t0.Add(time.Minute)), Spec: edit,
				Scale: r.Steps[0].Scale, Pods: r.Steps[0].Pods, ResourceMetrics: r.Steps[0].ResourceMetrics, Observations: r.Steps[0].Observations})
		}), code: codes.InvalidArgument, field: "steps[1].observations"},
		{name: "simulate a pod model of a million pods", call: simulateWith(func(r *setpointv1.SimulateRequest) {
			r.PodModel = &setpointv1.PodModel{InitialReplicas: 2, Requests: map[string]string{"cpu": "100m"}}
			r.Steps[0] = &setpointv1.SimulateStep{Time: r.Steps[0].Time, Scale: &setpointv1.Scale{Replicas: 1_000_000}, MetricValues: []string{"1"}}
		}), code: codes.InvalidArgument, field: "steps[0].scale.replicas"},
		{name: "watch a name without namespace", call: watchWith(&setpointv1.WatchRequest{Cluster: "eu1", Name: "web"}), code: codes.InvalidArgument, field: "name"},
		{name: "watch resuming after a future revision", call: watchWith(&setpointv1.WatchRequest{ResumeAfter: math.MaxUint64}), code: codes.OutOfRange},
		// Reads.
		{name: "get without target", call: func(ctx context.Context, h *hostileClient) (proto.Message, error) {
			return h.c.GetTarget(ctx, &setpointv1.GetTargetRequest{})
		}, code: codes.InvalidArgument, field: "target"},
		{name: "get of an unknown target", call: func(ctx context.Context, h *hostileClient) (proto.Message, error) {
			return h.c.GetTarget(ctx, &setpointv1.GetTargetRequest{Target: key("nobody")})
		}, code: codes.NotFound},
		{name: "delete of an unknown target", call: func(ctx context.Context, h *hostileClient) (proto.Message, error) {
			return h.c.DeleteTarget(ctx, &setpointv1.DeleteTargetRequest{Target: key("nobody")})
		}, code: codes.NotFound},
		{name: "list page size negative", call: func(ctx context.Context, h *hostileClient) (proto.Message, error) {
			return h.c.ListTargets(ctx, &setpointv1.ListTargetsRequest{PageSize: -1})
		}, code: codes.InvalidArgument, field: "page_size"},
		{name: "list page size over the maximum", call: func(ctx context.Context, h *hostileClient) (proto.Message, error) {
			return h.c.ListTargets(ctx, &setpointv1.ListTargetsRequest{PageSize: math.MaxInt32})
		}, code: codes.InvalidArgument, field: "page_size"},
		{name: "list namespace without cluster", call: func(ctx context.Context, h *hostileClient) (proto.Message, error) {
			return h.c.ListTargets(ctx, &setpointv1.ListTargetsRequest{Namespace: "shop"})
		}, code: codes.InvalidArgument, field: "namespace"},
		{name: "list with a forged page token", call: func(ctx context.Context, h *hostileClient) (proto.Message, error) {
			return h.c.ListTargets(ctx, &setpointv1.ListTargetsRequest{PageToken: "!!not base64!!"})
		}, code: codes.InvalidArgument, field: "page_token"},
		{name: "list with another query's page token", call: func(ctx context.Context, h *hostileClient) (proto.Message, error) {
			return h.c.ListTargets(ctx, &setpointv1.ListTargetsRequest{Cluster: "zz", PageToken: "AA=="})
		}, code: codes.InvalidArgument, field: "page_token"},
	}
}

// TestBadInputCatalogue sends every catalogue entry to a real server (TCP,
// bbolt) and checks its status code and the field its BadRequest names,
// while a well-behaved caller keeps deciding and the health service keeps
// answering SERVING.
func TestBadInputCatalogue(t *testing.T) {
	entries := catalogue()
	if len(entries) < 50 {
		t.Fatalf("the catalogue has %d entries, want at least 50", len(entries))
	}
	ts := start(t, setup{})
	conn := dial(t, ts.addr, grpc.WithTransportCredentials(insecureCreds()), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	h := &hostileClient{c: setpointv1.NewAutoscalerServiceClient(conn), conn: conn}

	// The well-behaved caller, on its own connection.
	good := ts.client(t)
	health := healthpb.NewHealthClient(dial(t, ts.addr))
	var (
		served, failures atomic.Int64
		firstFailure     atomic.Value
		wg               sync.WaitGroup
	)
	ctx, stop := context.WithCancel(t.Context())
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := good.Recommend(cctx, request(fmt.Sprintf("good-%d", i%8), 3, t0))
			if err == nil {
				var hr *healthpb.HealthCheckResponse
				hr, err = health.Check(cctx, &healthpb.HealthCheckRequest{Service: setpointv1.AutoscalerService_ServiceDesc.ServiceName})
				if err == nil && hr.GetStatus() != healthpb.HealthCheckResponse_SERVING {
					err = fmt.Errorf("health %v", hr.GetStatus())
				}
			}
			cancel()
			switch {
			case ctx.Err() != nil:
			case err != nil:
				failures.Add(1)
				firstFailure.CompareAndSwap(nil, err)
			default:
				served.Add(1)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})

	for _, e := range entries {
		t.Run(e.name, func(t *testing.T) {
			resp, err := e.call(t.Context(), h)
			if got := status.Code(err); got != e.code {
				t.Fatalf("code %v (%v), want %v", got, err, e.code)
			}
			switch {
			case e.code == codes.InvalidArgument && e.field == "":
				// Bytes that do not decode have no field to name.
				if msg := status.Convert(err).Message(); !strings.Contains(msg, "does not decode") {
					t.Errorf("message %q does not say the request does not decode", msg)
				}
			case e.code == codes.InvalidArgument:
				checkBadRequest(t, err, e.field)
			}
			if err == nil && e.check != nil {
				e.check(t, resp)
			}
			if msg := status.Convert(err).Message(); e.code != codes.OK && strings.Contains(msg, "goroutine") {
				t.Errorf("message leaks a stack: %q", msg)
			}
			// Messages are in the project's words, not a Go package's
			// (grpc-go's own refusals, before any of our code, excepted).
			for _, prefix := range []string{"proto: ", "server: ", "store: ", "engine: ", "convert: "} {
				if msg := status.Convert(err).Message(); strings.Contains(msg, prefix) {
					t.Errorf("message carries a package prefix %q: %q", prefix, msg)
				}
			}
		})
	}
	stop()
	wg.Wait()
	t.Logf("catalogue: %d entries; the well-behaved caller was served %d times meanwhile, failed %d times", len(entries), served.Load(), failures.Load())
	if failures.Load() > 0 {
		t.Errorf("the well-behaved caller failed %d times, first: %v", failures.Load(), firstFailure.Load())
	}
	if served.Load() == 0 {
		t.Error("the well-behaved caller was never served")
	}
}

// checkBadRequest checks that an InvalidArgument error carries a
// BadRequest detail naming field.
func checkBadRequest(t *testing.T, err error, field string) {
	t.Helper()
	var names []string
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				if v.GetDescription() == "" {
					t.Errorf("violation of %s has no description", v.GetField())
				}
				if v.GetField() == field {
					return
				}
				names = append(names, v.GetField())
			}
		}
	}
	t.Errorf("%v: BadRequest names %q, want %q", err, names, field)
}

// rawBytes is a request or response left as bytes by rawCodec.
type rawBytes []byte

// rawCodec sends rawBytes as they are, to put on the wire what a
// protobuf encoder never would.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.(rawBytes))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	p, ok := v.(*rawBytes)
	if !ok {
		return errors.New("rawCodec: not *rawBytes")
	}
	*p = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// h2Conn is a raw HTTP/2 connection to the server's gRPC port: the
// client preface and SETTINGS are sent, then whatever the test frames.
type h2Conn struct {
	net.Conn
	fr *http2.Framer
}

// dialH2 opens a raw HTTP/2 connection to addr, closed when the test ends.
func dialH2(t *testing.T, addr string) *h2Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return &h2Conn{Conn: c, fr: fr}
}

// startBlock sends a HEADERS frame that opens a request's header block
// and does not end it: the pseudo-headers of a Recommend call, then the
// start of a literal header whose value is valueLen bytes long.
func (h *h2Conn) startBlock(t *testing.T, valueLen int) {
	t.Helper()
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", setpointv1.AutoscalerService_Recommend_FullMethodName},
		{":authority", "localhost"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	buf.WriteByte(0x00) // literal without indexing, new name
	buf.Write(hpackInt(0, 7, len("x-pad")))
	buf.WriteString("x-pad")
	buf.Write(hpackInt(0, 7, valueLen))
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: buf.Bytes()}); err != nil {
		t.Fatal(err)
	}
}

// hpackInt encodes n as an HPACK integer with an n-bit prefix (RFC 7541
// §5.1) after the first byte's high bits first.
func hpackInt(first byte, prefix uint, n int) []byte {
	limit := 1<<prefix - 1
	if n < limit {
		return []byte{first | byte(n)}
	}
	out := []byte{first | byte(limit)}
	for n -= limit; n >= 128; n >>= 7 {
		out = append(out, byte(n%128+128))
	}
	return append(out, byte(n))
}

// closedWithin reports whether the server closes the connection within d
// (the frames it sends meanwhile, SETTINGS or GOAWAY, are read and
// dropped).
func (h *h2Conn) closedWithin(d time.Duration) bool {
	_ = h.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, h.Conn)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// TestHugeHeaderBlockIsRefused: anonymous connections each send the
// start of a 4 MiB header value in CONTINUATION frames and never end the
// block. The server refuses every block past its header-list limit (64
// KiB) by closing the connection, so what it holds per connection stays in
// kilobytes (grpc-go's 16 MiB default held each block whole until
// keepalive gave up, about 80 s).
func TestHugeHeaderBlockIsRefused(t *testing.T) {
	const (
		conns     = 8
		valueLen  = 4 << 20
		perConnOK = 256 << 10
	)
	ts := start(t, setup{})
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	hs := make([]*h2Conn, conns)
	var wg sync.WaitGroup
	for i := range hs {
		hs[i] = dialH2(t, ts.addr)
		hs[i].startBlock(t, valueLen)
		wg.Go(func() {
			chunk := bytes.Repeat([]byte("a"), 16<<10)
			_ = hs[i].SetWriteDeadline(time.Now().Add(10 * time.Second))
			for sent := 0; sent < valueLen; sent += len(chunk) {
				if hs[i].fr.WriteContinuation(1, false, chunk) != nil {
					return // closed by the server
				}
			}
		})
	}
	wg.Wait()
	runtime.GC()
	var during runtime.MemStats
	runtime.ReadMemStats(&during)
	grown := int64(during.HeapInuse) - int64(before.HeapInuse)
	t.Logf("%d connections, each with %d MiB of an unfinished header block: heap in use %+d KiB (%d KiB per connection)", conns, valueLen>>20, grown>>10, grown/conns>>10)
	if grown > conns*perConnOK {
		t.Errorf("the heap grew by %d KiB while %d unfinished header blocks were sent, over %d KiB per connection", grown>>10, conns, perConnOK>>10)
	}
	for i, h := range hs {
		if !h.closedWithin(2 * time.Second) {
			t.Errorf("connection %d: still open with a header block over the header-list limit", i)
		}
	}
}

// TestUnfinishedHeaderBlockTimesOut: a connection that opens a header
// block and keeps it open with a small CONTINUATION frame every 100 ms,
// never over the header-list limit, is closed once the block has been
// open for Options.HeaderTimeout; a well-formed call on another
// connection is served meanwhile.
func TestUnfinishedHeaderBlockTimesOut(t *testing.T) {
	ts := start(t, setup{opts: server.Options{HeaderTimeout: 500 * time.Millisecond}})
	h := dialH2(t, ts.addr)
	h.startBlock(t, 60<<10)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if h.fr.WriteContinuation(1, false, []byte("aaaaaaaaaa")) != nil {
					return
				}
			}
		}
	}()
	if _, err := ts.client(t).Recommend(t.Context(), request("web", 3, t0)); err != nil {
		t.Fatalf("a well-formed call: %v", err)
	}
	start := time.Now()
	if !h.closedWithin(3 * time.Second) {
		t.Fatal("a connection with a header block open for 3 s is still open (HeaderTimeout 500ms)")
	}
	t.Logf("closed %v after the check began", time.Since(start).Round(10*time.Millisecond))
}
