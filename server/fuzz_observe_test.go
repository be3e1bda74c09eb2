package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/convert"
	"github.com/setpointhq/setpoint/target"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// FuzzObserve feeds arbitrary bytes through what the server does with an
// Observe request for a target with one decision: unmarshal, Validate,
// observe, and the response. Every input ends in a recorded observation,
// an error the server answers with a caller's code (never Internal), or
// InvalidArgument; an applied change observed twice changes nothing the
// second time (agents retry).
func FuzzObserve(f *testing.F) {
	for _, req := range []*setpointv1.ObserveRequest{
		{Target: fuzzKey, DecisionId: "d1", Change: &setpointv1.ObserveRequest_Applied{Applied: &setpointv1.AppliedChange{From: 2, To: 3}}},
		{Target: fuzzKey, DecisionId: "d1", Change: &setpointv1.ObserveRequest_Failed{Failed: &setpointv1.FailedChange{To: 3, Message: "forbidden"}}},
		{Target: fuzzKey, DecisionId: "other", Change: &setpointv1.ObserveRequest_Failed{Failed: &setpointv1.FailedChange{To: 3}}},
		{Target: fuzzKey, Change: &setpointv1.ObserveRequest_External{External: &setpointv1.ExternalChange{From: 3, To: 9}}},
	} {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	base := fuzzDecided(f)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		req := &setpointv1.ObserveRequest{}
		if proto.Unmarshal(b, req) != nil {
			return
		}
		if err := req.Validate(); err != nil {
			var ve *setpointv1.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate: %T %v", err, err)
			}
			return
		}
		rec := fuzzDecided(t) // its own copy: observe changes it
		now := base.LastSeen.Add(time.Second)
		err := target.Observe(&rec, convert.Observation(req), now)
		if err != nil {
			if c := status.Code(toStatus(context.Background(), quiet, err)); c == codes.Internal || c == codes.Unknown {
				t.Fatalf("observe: %v answers %v", err, c)
			}
			return
		}
		if _, err := proto.Marshal(&setpointv1.ObserveResponse{Status: convert.Status(rec.Status)}); err != nil {
			t.Fatalf("response does not marshal: %v", err)
		}
		if _, ok := req.GetChange().(*setpointv1.ObserveRequest_Applied); ok {
			again := rec
			again.Events = append([]target.Event(nil), rec.Events...)
			if err := target.Observe(&again, convert.Observation(req), now.Add(time.Second)); err != nil {
				t.Fatalf("the same applied change observed again: %v", err)
			}
			if diff := cmp.Diff(rec.History, again.History, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("observing an applied change twice changed the history (-once +twice):\n%s", diff)
			}
		}
	})
}

var fuzzKey = &setpointv1.TargetKey{Cluster: "eu1", Namespace: "shop", Name: "web"}

// fuzzDecided returns the record of a target after one decision, "d1", to
// scale 2 pods at 80% of a 50% target up to 4.
func fuzzDecided(tb testing.TB) target.Record {
	tb.Helper()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	util := int32(50)
	req := &setpointv1.RecommendRequest{
		Target: fuzzKey,
		Spec: &setpointv1.HorizontalPodAutoscalerSpec{MaxReplicas: 10, Metrics: []*setpointv1.MetricSpec{{Type: "Resource",
			Resource: &setpointv1.ResourceMetricSource{Name: "cpu", Target: &setpointv1.MetricTarget{Type: "Utilization", AverageUtilization: &util}}}}},
		Scale:           &setpointv1.Scale{Replicas: 2, StatusReplicas: 2, Selector: "app=web"},
		ResourceMetrics: &setpointv1.ResourceMetrics{},
		Observations:    []*setpointv1.MetricObservation{{}},
	}
	for _, name := range []string{"web-0", "web-1"} {
		start := timestamppb.New(now.Add(-time.Hour))
		req.Pods = append(req.Pods, &setpointv1.Pod{Name: name, Phase: "Running", StartTime: start,
			Ready:      &setpointv1.PodReadyCondition{Status: "True", LastTransitionTime: start},
			Containers: []*setpointv1.Container{{Name: "app", Requests: map[string]string{"cpu": "500m"}}}})
		req.ResourceMetrics.Items = append(req.ResourceMetrics.Items, &setpointv1.PodMetrics{Pod: name, Timestamp: timestamppb.New(now.Add(-15 * time.Second)),
			Containers: []*setpointv1.ContainerMetrics{{Name: "app", Usage: map[string]string{"cpu": "400m"}}}})
	}
	in, err := convert.Input(req, now)
	if err != nil {
		tb.Fatal(err)
	}
	var rec target.Record
	if err := target.Decide(&rec, target.Input{Engine: in}, "d1", now); err != nil {
		tb.Fatal(err)
	}
	return rec
}
