package convert_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/internal/testkit"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/convert"
	"github.com/setpointhq/setpoint/target"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/api/resource"
)

var (
	t0     = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	key    = &setpointv1.TargetKey{Cluster: "eu1", Namespace: "shop", Name: "web"}
	ref    = target.Ref{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	cmpOpt = cmp.Options{cmpopts.EquateEmpty()}
)

// richInput uses every field of the engine's input.
func richInput() engine.Input {
	sel := &engine.LabelSelector{MatchLabels: map[string]string{"queue": "orders"},
		MatchExpressions: []engine.LabelSelectorRequirement{{Key: "zone", Operator: "In", Values: []string{"a", "b"}}}}
	return engine.Input{
		Namespace: key.GetNamespace(),
		Now:       t0,
		Spec: engine.Spec{
			MinReplicas: 0, MaxReplicas: 20,
			Metrics: []engine.MetricSpec{
				{Type: engine.ResourceSource, Resource: "cpu", Target: engine.Target{Type: engine.UtilizationTarget, Utilization: 60}},
				{Type: engine.ContainerResourceSource, Resource: "memory", Container: "app", Target: engine.Target{Type: engine.AverageValueTarget, Milli: 512 << 20 * 1000}},
				{Type: engine.PodsSource, Metric: engine.MetricIdentifier{Name: "rps"}, Target: engine.Target{Type: engine.AverageValueTarget, Milli: 1500}},
				{Type: engine.ObjectSource, Metric: engine.MetricIdentifier{Name: "hits", Selector: &engine.LabelSelector{}},
					DescribedObject: engine.ObjectReference{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: "main"},
					Target:          engine.Target{Type: engine.ValueTarget, Milli: 10000}},
				{Type: engine.ExternalSource, Metric: engine.MetricIdentifier{Name: "queue_depth", Selector: sel}, Target: engine.Target{Type: engine.AverageValueTarget, Milli: 30000}},
			},
			Behavior: &engine.Behavior{
				ScaleUp: engine.Rules{StabilizationWindowSeconds: 0, SelectPolicy: engine.SelectMax, Tolerance: 0.05,
					Policies: []engine.Policy{{Type: engine.PodsPolicy, Value: 4, PeriodSeconds: 15}, {Type: engine.PercentPolicy, Value: 100, PeriodSeconds: 15}}},
				ScaleDown: engine.Rules{StabilizationWindowSeconds: 300, SelectPolicy: engine.SelectMin, Tolerance: 0.1,
					Policies: []engine.Policy{{Type: engine.PercentPolicy, Value: 10, PeriodSeconds: 60}}},
			},
		},
		Settings: engine.Settings{Tolerance: 0.1, CPUInitializationPeriod: 5 * time.Minute, InitialReadinessDelay: 30 * time.Second, DownscaleStabilizationWindow: 5 * time.Minute},
		Scale:    engine.Scale{Replicas: 3, StatusReplicas: 3, Selector: "app=web"},
		Pods: []engine.Pod{
			{Name: "web-1", Phase: engine.PodRunning, StartTime: t0.Add(-time.Hour),
				Ready:      &engine.PodReadiness{Status: engine.ConditionTrue, LastTransitionTime: t0.Add(-50 * time.Minute)},
				Containers: []engine.Container{{Name: "app", Requests: engine.ResourceListOf(map[string]int64{"cpu": 250, "memory": 256 << 20 * 1000})}, {Name: "sidecar", Requests: engine.ResourceListOf(map[string]int64{"cpu": 50}), Sidecar: true}, {Name: "migrate", Requests: engine.ResourceListOf(map[string]int64{"cpu": 500}), Init: true}},
				Overhead:   engine.ResourceListOf(map[string]int64{"cpu": 10})},
			{Name: "web-2", Phase: engine.PodPending, Deleting: true, Requests: engine.ResourceListOf(map[string]int64{"cpu": 1000})},
		},
		ResourceMetrics: engine.ResourceMetrics{Pods: []engine.PodUsage{
			{Pod: "web-1", Timestamp: t0.Add(-10 * time.Second), Window: 30 * time.Second, Containers: []engine.ContainerUsage{{Name: "app", Usage: engine.ResourceListOf(map[string]int64{"cpu": 180})}}},
		}},
		Observations: []engine.Observation{
			{}, {},
			{Values: []engine.MetricValue{{Pod: "web-1", Milli: 1234, Timestamp: t0, Window: time.Minute}, {Pod: "web-2", Milli: 0, Timestamp: t0, Window: 0}}},
			{Values: []engine.MetricValue{{Milli: 8000, Timestamp: t0}}},
			{Err: "unable to fetch metrics from external metrics API: boom"},
		},
	}
}

func TestRoundTrip(t *testing.T) {
	in := richInput()
	req, err := convert.Request(key, ref, in)
	if err != nil {
		t.Fatal(err)
	}
	// Through the wire form too.
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	wire := &setpointv1.RecommendRequest{}
	if err := proto.Unmarshal(b, wire); err != nil {
		t.Fatal(err)
	}
	got, err := convert.Input(wire, t0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, got, cmpOpt); diff != "" {
		t.Errorf("Input(Request(in)) differs (-want +got):\n%s", diff)
	}
}

// FuzzRoundTrip checks Input(Request(in)) == in for generated valid inputs,
// and InputIn into a Scratch holding earlier inputs (or reset).
func FuzzRoundTrip(f *testing.F) {
	for i := range 8 {
		f.Add(uint64(i), uint64(i*7919))
	}
	f.Fuzz(func(t *testing.T, s1, s2 uint64) {
		in := randomInput(rand.New(rand.NewPCG(s1, s2)))
		req, err := convert.Request(key, ref, in)
		if err != nil {
			t.Fatalf("Request: %v", err)
		}
		got, err := convert.Input(req, in.Now)
		if err != nil {
			t.Fatalf("Input: %v", err)
		}
		if diff := cmp.Diff(in, got, cmpOpt); diff != "" {
			t.Errorf("Input(Request(in)) differs (-want +got):\n%s", diff)
		}
		// Into the Scratch the earlier inputs were converted into, too.
		fuzzScratch.Lock()
		defer fuzzScratch.Unlock()
		got, err = convert.InputIn(req, in.Now, &fuzzScratch.s)
		if err != nil {
			t.Fatalf("InputIn: %v", err)
		}
		if diff := cmp.Diff(in, got, cmpOpt); diff != "" {
			t.Errorf("InputIn(Request(in)) differs (-want +got):\n%s", diff)
		}
		if s1%2 == 0 {
			fuzzScratch.s.Reset()
		}
		// The decision made from it, as Recommend answers it in reused
		// memory, is the one Decision converts.
		d, err := engine.Decide(in, engine.History{})
		if err != nil {
			return
		}
		last := target.LastDecision{ID: fmt.Sprint(s2), At: in.Now, Decision: d}
		checkResponse(t, last, &fuzzScratch.r)
	})
}

// checkResponse checks that RecommendResponse in r's memory is the response
// of Decision(last), encoded to the same bytes, and that Reset clears it.
func checkResponse(t *testing.T, last target.LastDecision, r *convert.Response) {
	t.Helper()
	want := &setpointv1.RecommendResponse{Decision: convert.Decision(last)}
	got := convert.RecommendResponse(last, r)
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Fatalf("RecommendResponse in reused memory (-Decision +got):\n%s", diff)
	}
	deterministic := proto.MarshalOptions{Deterministic: true}
	wantBytes, err := deterministic.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	gotBytes, err := deterministic.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(wantBytes, gotBytes) {
		t.Fatalf("RecommendResponse in reused memory encodes to %x, Decision's response to %x", gotBytes, wantBytes)
	}
	decision, explanation, status := got.GetDecision(), got.GetDecision().GetExplanation(), got.GetDecision().GetStatus()
	held := []proto.Message{got, decision, explanation, status}
	for _, m := range explanation.GetMetrics() {
		held = append(held, m)
	}
	for _, s := range explanation.GetSteps() {
		held = append(held, s)
	}
	for _, m := range status.GetCurrentMetrics() {
		held = append(held, m)
	}
	for _, c := range status.GetConditions() {
		held = append(held, c)
	}
	r.Reset()
	for _, m := range held {
		if !proto.Equal(m, m.ProtoReflect().Type().New().Interface()) {
			t.Fatalf("after Reset, the response's memory keeps %v", m)
		}
	}
}

// fuzzScratch is the Scratch FuzzRoundTrip's inputs are converted into,
// one after the other.
var fuzzScratch struct {
	sync.Mutex
	s convert.Scratch
	r convert.Response // and the responses to their decisions
}

// randomInput generates a valid input whose tolerances are readings of
// quantities, as every tolerance reaching the engine is.
func randomInput(r *rand.Rand) engine.Input {
	in := engine.Input{Now: t0.Add(time.Duration(r.Int64N(1e15))), Namespace: key.GetNamespace()}
	tol := func() float64 {
		q := resource.MustParse(fmt.Sprintf("%dm", r.IntN(2000)))
		return q.AsApproximateFloat64()
	}
	in.Settings = engine.Settings{Tolerance: float64(r.IntN(1000)) / 997, CPUInitializationPeriod: time.Duration(r.Int64N(1e12)),
		InitialReadinessDelay: time.Duration(r.Int64N(1e12)), DownscaleStabilizationWindow: time.Duration(r.Int64N(1e12))}
	in.Spec.MaxReplicas = 1 + r.Int32N(100)
	in.Spec.MinReplicas = 1 + r.Int32N(in.Spec.MaxReplicas)
	milli := func() int64 { return 1 + r.Int64N(1<<50) }
	types := []engine.MetricSourceType{engine.ResourceSource, engine.ContainerResourceSource, engine.PodsSource, engine.ObjectSource, engine.ExternalSource}
	for range 1 + r.IntN(5) {
		m := engine.MetricSpec{Type: types[r.IntN(len(types))]}
		switch m.Type {
		case engine.ResourceSource, engine.ContainerResourceSource:
			m.Resource = "cpu"
			if m.Type == engine.ContainerResourceSource {
				m.Container = "app"
			}
			m.Target = engine.Target{Type: engine.UtilizationTarget, Utilization: 1 + r.Int32N(200)}
			if r.IntN(2) == 0 {
				m.Target = engine.Target{Type: engine.AverageValueTarget, Milli: milli()}
			}
		case engine.PodsSource:
			m.Metric.Name = "m"
			m.Target = engine.Target{Type: engine.AverageValueTarget, Milli: milli()}
		case engine.ObjectSource, engine.ExternalSource:
			m.Metric.Name = "m"
			if r.IntN(2) == 0 {
				m.Metric.Selector = &engine.LabelSelector{MatchLabels: map[string]string{"k": "v"}}
			}
			m.DescribedObject = engine.ObjectReference{Kind: "Service", Name: "s"}
			if m.Type == engine.ExternalSource {
				m.DescribedObject = engine.ObjectReference{}
			}
			m.Target = engine.Target{Type: engine.ValueTarget, Milli: milli()}
			if r.IntN(2) == 0 {
				m.Target.Type = engine.AverageValueTarget
			}
		}
		in.Spec.Metrics = append(in.Spec.Metrics, m)
		obs := engine.Observation{}
		for j := range r.IntN(3) {
			v := engine.MetricValue{Milli: r.Int64N(1<<40) - 1<<39, Timestamp: in.Now.Add(-time.Duration(r.Int64N(1e11)))}
			if m.Type == engine.PodsSource {
				v.Pod, v.Window = fmt.Sprintf("p%d", j), time.Duration(r.Int64N(1e11))
			}
			if m.Type == engine.ObjectSource && j > 0 {
				break
			}
			obs.Values = append(obs.Values, v)
		}
		in.Observations = append(in.Observations, obs)
	}
	if r.IntN(2) == 0 {
		rules := func() engine.Rules {
			ps := []engine.PolicyType{engine.PodsPolicy, engine.PercentPolicy}
			sp := []engine.SelectPolicy{engine.SelectMax, engine.SelectMin, engine.SelectDisabled}
			rl := engine.Rules{StabilizationWindowSeconds: r.Int32N(3601), SelectPolicy: sp[r.IntN(3)], Tolerance: tol()}
			for range 1 + r.IntN(3) {
				rl.Policies = append(rl.Policies, engine.Policy{Type: ps[r.IntN(2)], Value: 1 + r.Int32N(1000), PeriodSeconds: 1 + r.Int32N(1800)})
			}
			return rl
		}
		in.Spec.Behavior = &engine.Behavior{ScaleUp: rules(), ScaleDown: rules()}
	}
	in.Scale = engine.Scale{Replicas: r.Int32N(50), StatusReplicas: r.Int32N(50)}
	if r.IntN(2) == 0 {
		in.Scale.Selector = "app=web"
	}
	for i := range r.IntN(10) {
		p := engine.Pod{Name: fmt.Sprintf("p%d", i), Phase: engine.PodRunning, StartTime: in.Now.Add(-time.Duration(r.Int64N(1e12)))}
		if r.IntN(2) == 0 {
			p.Ready = &engine.PodReadiness{Status: engine.ConditionFalse, LastTransitionTime: p.StartTime}
		}
		p.Containers = []engine.Container{{Name: "app", Requests: engine.ResourceListOf(map[string]int64{"cpu": r.Int64N(1 << 40), "memory": r.Int64N(1 << 50)})}}
		in.Pods = append(in.Pods, p)
		in.ResourceMetrics.Pods = append(in.ResourceMetrics.Pods, engine.PodUsage{Pod: p.Name, Timestamp: in.Now, Window: time.Duration(r.Int64N(1e11)),
			Containers: []engine.ContainerUsage{{Name: "app", Usage: engine.ResourceListOf(map[string]int64{"cpu": r.Int64N(1 << 40)})}}})
	}
	return in
}

// controllerReading is how the Kubernetes controller reads a tolerance the
// API server stored: the approximate float64 of its canonical form.
func controllerReading(s string) float64 {
	q := resource.MustParse(s)
	canonical := resource.MustParse(q.String())
	return canonical.AsApproximateFloat64()
}

func TestToleranceQuantity(t *testing.T) {
	for _, s := range []string{"0", "0.1", "0.05", "1", "1.5", "0.333", "10m", "7m", "123456m", "1e-3", "300m", "0.3"} {
		want := controllerReading(s)
		got, err := convert.ToleranceQuantity(want)
		if err != nil {
			t.Errorf("ToleranceQuantity(%v): %v", want, err)
			continue
		}
		if back := controllerReading(got); back != want {
			t.Errorf("ToleranceQuantity(%v) = %q, reads back as %v", want, got, back)
		}
	}
}

// TestToleranceIsReadInCanonicalForm: "0.3" and "300m" are the same stored
// quantity, so the controller (and Setpoint) read the same tolerance.
func TestToleranceIsReadInCanonicalForm(t *testing.T) {
	read := func(tol string) float64 {
		req := minimalRequest()
		req.Spec.Behavior = &setpointv1.HorizontalPodAutoscalerBehavior{ScaleUp: &setpointv1.ScalingRules{Tolerance: tol}}
		in, err := convert.Input(req, time.Unix(1, 0))
		if err != nil {
			t.Fatal(err)
		}
		return in.Spec.Behavior.ScaleUp.Tolerance
	}
	if a, b := read("0.3"), read("300m"); a != b || a != controllerReading("300m") {
		t.Errorf(`tolerance "0.3" reads %v, "300m" reads %v; want both %v`, a, b, controllerReading("300m"))
	}
}

// minimalRequest is the smallest valid request.
func minimalRequest() *setpointv1.RecommendRequest {
	return &setpointv1.RecommendRequest{
		Target: key,
		Spec: &setpointv1.HorizontalPodAutoscalerSpec{MaxReplicas: 10, Metrics: []*setpointv1.MetricSpec{{
			Type: "Resource", Resource: &setpointv1.ResourceMetricSource{Name: "cpu", Target: &setpointv1.MetricTarget{Type: "Utilization", AverageUtilization: testkit.Ptr[int32](50)}},
		}}},
		Scale:        &setpointv1.Scale{Replicas: 2, StatusReplicas: 2, Selector: "app=web"},
		Observations: []*setpointv1.MetricObservation{{}},
	}
}

func TestDefaults(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*setpointv1.RecommendRequest)
		want   func(*engine.Input)
	}{
		{"settings and min replicas", func(*setpointv1.RecommendRequest) {}, func(*engine.Input) {}},
		{"empty behavior gets both directions' defaults", func(r *setpointv1.RecommendRequest) {
			r.Spec.Behavior = &setpointv1.HorizontalPodAutoscalerBehavior{}
		}, func(in *engine.Input) {
			in.Spec.Behavior = &engine.Behavior{
				ScaleUp: engine.Rules{SelectPolicy: engine.SelectMax, Tolerance: 0.1, Policies: []engine.Policy{
					{Type: engine.PodsPolicy, Value: 4, PeriodSeconds: 15}, {Type: engine.PercentPolicy, Value: 100, PeriodSeconds: 15}}},
				ScaleDown: engine.Rules{StabilizationWindowSeconds: 300, SelectPolicy: engine.SelectMax, Tolerance: 0.1, Policies: []engine.Policy{
					{Type: engine.PercentPolicy, Value: 100, PeriodSeconds: 15}}},
			}
		}},
		{"scale-down window from settings, tolerance from quantity", func(r *setpointv1.RecommendRequest) {
			r.Settings = &setpointv1.ControllerSettings{DownscaleStabilizationWindow: durationpb.New(90 * time.Second), Tolerance: testkit.Ptr(0.2)}
			r.Spec.Behavior = &setpointv1.HorizontalPodAutoscalerBehavior{ScaleUp: &setpointv1.ScalingRules{Tolerance: "50m", SelectPolicy: "Min"}, ScaleDown: &setpointv1.ScalingRules{}}
		}, func(in *engine.Input) {
			in.Settings.DownscaleStabilizationWindow, in.Settings.Tolerance = 90*time.Second, 0.2
			in.Spec.Behavior = &engine.Behavior{
				ScaleUp: engine.Rules{SelectPolicy: engine.SelectMin, Tolerance: 0.05, Policies: []engine.Policy{
					{Type: engine.PodsPolicy, Value: 4, PeriodSeconds: 15}, {Type: engine.PercentPolicy, Value: 100, PeriodSeconds: 15}}},
				ScaleDown: engine.Rules{StabilizationWindowSeconds: 90, SelectPolicy: engine.SelectMax, Tolerance: 0.2, Policies: []engine.Policy{
					{Type: engine.PercentPolicy, Value: 100, PeriodSeconds: 15}}},
			}
		}},
		{"resource target prefers average value", func(r *setpointv1.RecommendRequest) {
			r.Spec.Metrics[0].Resource.Target.AverageValue = "500m"
		}, func(in *engine.Input) {
			in.Spec.Metrics[0].Target = engine.Target{Type: engine.AverageValueTarget, Milli: 500}
		}},
		// Kubernetes reads an External target's averageValue first, an
		// Object target's by its type, whatever else is set.
		{"external target with value and average value is average value", func(r *setpointv1.RecommendRequest) {
			r.Spec.Metrics[0] = &setpointv1.MetricSpec{Type: "External", External: &setpointv1.ExternalMetricSource{
				Metric: &setpointv1.MetricIdentifier{Name: "q"}, Target: &setpointv1.MetricTarget{Type: "Value", Value: "30", AverageValue: "5"}}}
		}, func(in *engine.Input) {
			in.Spec.Metrics[0] = engine.MetricSpec{Type: engine.ExternalSource, Metric: engine.MetricIdentifier{Name: "q"}, Target: engine.Target{Type: engine.AverageValueTarget, Milli: 5000}}
		}},
		{"object target with value and average value follows its type", func(r *setpointv1.RecommendRequest) {
			r.Spec.Metrics[0] = &setpointv1.MetricSpec{Type: "Object", Object: &setpointv1.ObjectMetricSource{
				DescribedObject: &setpointv1.CrossVersionObjectReference{Kind: "Service", Name: "s"},
				Metric:          &setpointv1.MetricIdentifier{Name: "q"}, Target: &setpointv1.MetricTarget{Type: "Value", Value: "30", AverageValue: "5"}}}
		}, func(in *engine.Input) {
			in.Spec.Metrics[0] = engine.MetricSpec{Type: engine.ObjectSource, Metric: engine.MetricIdentifier{Name: "q"},
				DescribedObject: engine.ObjectReference{Kind: "Service", Name: "s"}, Target: engine.Target{Type: engine.ValueTarget, Milli: 30000}}
		}},
		{"quantity milli-value rounds up", func(r *setpointv1.RecommendRequest) {
			r.Spec.Metrics[0].Resource.Target = &setpointv1.MetricTarget{Type: "AverageValue", AverageValue: "1.0001"}
		}, func(in *engine.Input) {
			in.Spec.Metrics[0].Target = engine.Target{Type: engine.AverageValueTarget, Milli: 1001}
		}},
		{"pods metric window defaults to 60s", func(r *setpointv1.RecommendRequest) {
			r.Spec.Metrics[0] = &setpointv1.MetricSpec{Type: "Pods", Pods: &setpointv1.PodsMetricSource{
				Metric: &setpointv1.MetricIdentifier{Name: "rps"}, Target: &setpointv1.MetricTarget{Type: "AverageValue", AverageValue: "10"}}}
			r.Observations[0].Values = []*setpointv1.MetricValue{{Pod: "a", Value: "3"}}
		}, func(in *engine.Input) {
			in.Spec.Metrics[0] = engine.MetricSpec{Type: engine.PodsSource, Metric: engine.MetricIdentifier{Name: "rps"}, Target: engine.Target{Type: engine.AverageValueTarget, Milli: 10000}}
			in.Observations[0].Values = []engine.MetricValue{{Pod: "a", Milli: 3000, Window: time.Minute}}
		}},
		{"bad selector is the engine's to report", func(r *setpointv1.RecommendRequest) { r.Scale.Selector = "app in (" }, func(in *engine.Input) {
			in.Scale.Selector = "app in ("
			in.Scale.SelectorError = "unable to parse requirement: found '', expected: ',', ')' or identifier"
		}},
		{"empty selector stays empty", func(r *setpointv1.RecommendRequest) { r.Scale.Selector = "" }, func(in *engine.Input) { in.Scale.Selector = "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := minimalRequest()
			tt.modify(req)
			want := engine.Input{
				Now: t0, Namespace: key.GetNamespace(),
				Spec: engine.Spec{MinReplicas: 1, MaxReplicas: 10, Metrics: []engine.MetricSpec{
					{Type: engine.ResourceSource, Resource: "cpu", Target: engine.Target{Type: engine.UtilizationTarget, Utilization: 50}}}},
				Settings:     engine.Settings{Tolerance: 0.1, CPUInitializationPeriod: 5 * time.Minute, InitialReadinessDelay: 30 * time.Second, DownscaleStabilizationWindow: 5 * time.Minute},
				Scale:        engine.Scale{Replicas: 2, StatusReplicas: 2, Selector: "app=web"},
				Observations: []engine.Observation{{}},
			}
			tt.want(&want)
			got, err := convert.Input(req, t0)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, cmpOpt); diff != "" {
				t.Errorf("Input differs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidation(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*setpointv1.RecommendRequest)
		field  string
	}{
		{"invalid quantity", func(r *setpointv1.RecommendRequest) {
			r.Spec.Metrics = append(r.Spec.Metrics, &setpointv1.MetricSpec{}, &setpointv1.MetricSpec{Type: "External", External: &setpointv1.ExternalMetricSource{
				Metric: &setpointv1.MetricIdentifier{Name: "q"}, Target: &setpointv1.MetricTarget{Type: "AverageValue", AverageValue: "ten"}}})
			r.Observations = append(r.Observations, &setpointv1.MetricObservation{}, &setpointv1.MetricObservation{})
		}, "spec.metrics[2].external.target.average_value"},
		{"zero target", func(r *setpointv1.RecommendRequest) { r.Spec.Metrics[0].Resource.Target.AverageValue = "0" }, "spec.metrics[0].resource.target.average_value"},
		{"zero utilization", func(r *setpointv1.RecommendRequest) {
			r.Spec.Metrics[0].Resource.Target.AverageUtilization = testkit.Ptr[int32](0)
		}, "spec.metrics[0].resource.target.average_utilization"},
		{"unknown metric type", func(r *setpointv1.RecommendRequest) { r.Spec.Metrics[0].Type = "Custom" }, "spec.metrics[0].type"},
		{"type without source", func(r *setpointv1.RecommendRequest) { r.Spec.Metrics[0].Type = "Pods" }, "spec.metrics[0].pods"},
		{"unknown target type", func(r *setpointv1.RecommendRequest) { r.Spec.Metrics[0].Resource.Target.Type = "Average" }, "spec.metrics[0].resource.target.type"},
		{"negative replicas", func(r *setpointv1.RecommendRequest) { r.Scale.Replicas = -1 }, "scale.replicas"},
		{"min above max", func(r *setpointv1.RecommendRequest) { r.Spec.MinReplicas = testkit.Ptr[int32](11) }, "spec.min_replicas"},
		{"max below one", func(r *setpointv1.RecommendRequest) { r.Spec.MaxReplicas = 0 }, "spec.max_replicas"},
		{"scale to zero without object metric", func(r *setpointv1.RecommendRequest) { r.Spec.MinReplicas = testkit.Ptr[int32](0) }, "spec.min_replicas"},
		{"NaN tolerance", func(r *setpointv1.RecommendRequest) {
			r.Settings = &setpointv1.ControllerSettings{Tolerance: testkit.Ptr(math.NaN())}
		}, "settings.tolerance"},
		{"negative tolerance", func(r *setpointv1.RecommendRequest) {
			r.Settings = &setpointv1.ControllerSettings{Tolerance: testkit.Ptr(-0.1)}
		}, "settings.tolerance"},
		{"negative rule tolerance", func(r *setpointv1.RecommendRequest) {
			r.Spec.Behavior = &setpointv1.HorizontalPodAutoscalerBehavior{ScaleDown: &setpointv1.ScalingRules{Tolerance: "-1"}}
		}, "spec.behavior.scale_down.tolerance"},
		{"unknown policy type", func(r *setpointv1.RecommendRequest) {
			r.Spec.Behavior = &setpointv1.HorizontalPodAutoscalerBehavior{ScaleUp: &setpointv1.ScalingRules{Policies: []*setpointv1.ScalingPolicy{{Type: "Replicas", Value: 1, PeriodSeconds: 15}}}}
		}, "spec.behavior.scale_up.policies[0].type"},
		{"unknown select policy", func(r *setpointv1.RecommendRequest) {
			r.Spec.Behavior = &setpointv1.HorizontalPodAutoscalerBehavior{ScaleUp: &setpointv1.ScalingRules{SelectPolicy: "Average"}}
		}, "spec.behavior.scale_up.select_policy"},
		{"window too long", func(r *setpointv1.RecommendRequest) {
			r.Spec.Behavior = &setpointv1.HorizontalPodAutoscalerBehavior{ScaleDown: &setpointv1.ScalingRules{StabilizationWindowSeconds: testkit.Ptr[int32](3601)}}
		}, "spec.behavior.scale_down.stabilization_window_seconds"},
		{"empty pod name", func(r *setpointv1.RecommendRequest) { r.Pods = []*setpointv1.Pod{{Phase: "Running"}} }, "pods[0].name"},
		{"duplicate pod name", func(r *setpointv1.RecommendRequest) {
			r.Pods = []*setpointv1.Pod{{Name: "a", Phase: "Running"}, {Name: "a", Phase: "Running"}}
		}, "pods[1].name"},
		{"duplicate pod name among many", func(r *setpointv1.RecommendRequest) {
			r.Pods = nil
			for i := range 40 {
				r.Pods = append(r.Pods, &setpointv1.Pod{Name: fmt.Sprintf("p%d", i%39), Phase: "Running"})
			}
		}, "pods[39].name"},
		{"unknown phase", func(r *setpointv1.RecommendRequest) { r.Pods = []*setpointv1.Pod{{Name: "a", Phase: "running"}} }, "pods[0].phase"},
		{"negative request", func(r *setpointv1.RecommendRequest) {
			r.Pods = []*setpointv1.Pod{{Name: "a", Phase: "Running", Containers: []*setpointv1.Container{{Name: "c", Requests: map[string]string{"cpu": "-1"}}}}}
		}, `pods[0].containers[0].requests["cpu"]`},
		{"observations length", func(r *setpointv1.RecommendRequest) { r.Observations = nil }, "observations"},
		{"negative duration", func(r *setpointv1.RecommendRequest) {
			r.Settings = &setpointv1.ControllerSettings{InitialReadinessDelay: durationpb.New(-time.Second)}
		}, "settings.initial_readiness_delay"},
		{"bad metric value", func(r *setpointv1.RecommendRequest) {
			r.Observations[0].Values = []*setpointv1.MetricValue{{Value: "x"}}
		}, "observations[0].values[0].value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := minimalRequest()
			tt.modify(req)
			_, err := convert.Input(req, t0)
			var ve *setpointv1.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Input error = %v, want a *ValidationError", err)
			}
			for _, v := range ve.Violations {
				if v.Field == tt.field {
					return
				}
			}
			t.Errorf("violations %+v do not name %s", ve.Violations, tt.field)
		})
	}
}

func TestQuantity(t *testing.T) {
	tests := []struct {
		q    engine.Quantity
		want string
	}{
		{engine.Quantity{Milli: 1500}, "1500m"},
		{engine.Quantity{Milli: 2000}, "2"},
		{engine.Quantity{Milli: 1024 * 1024 * 1000, Format: engine.BinarySI}, "1Mi"},
		{engine.Quantity{Milli: 0}, "0"},
	}
	for _, tt := range tests {
		if got := convert.Quantity(tt.q); got != tt.want {
			t.Errorf("Quantity(%+v) = %q, want %q", tt.q, got, tt.want)
		}
	}
}

// TestDecision: every field of a decision reaches its API form; a zero
// time stays absent.
func TestDecision(t *testing.T) {
	util := int32(72)
	d := engine.Decision{
		DesiredReplicas: 5, Rescale: true, Error: "some metric failed",
		Status: engine.Status{
			CurrentReplicas: 3, DesiredReplicas: 5, LastScaleTime: t0,
			CurrentMetrics: []engine.MetricStatus{
				{Type: engine.ResourceSource, Resource: "cpu", AverageUtilization: &util, AverageValue: &engine.Quantity{Milli: 360}},
				{},
			},
			Conditions: []engine.Condition{
				{Type: engine.AbleToScale, Status: engine.ConditionTrue, Reason: "SucceededRescale", Message: "m1", LastTransitionTime: t0.Add(-time.Minute + 5)},
				{Type: engine.ScalingActive, Status: engine.ConditionFalse, Reason: "FailedGetResourceMetric", Message: "m2"},
			},
		},
		Explanation: engine.Explanation{
			CurrentReplicas: 3, Winner: 0, Proposal: 5,
			Metrics: []engine.MetricExplanation{
				{Name: "cpu", Outcome: engine.OutcomeScaled, Proposal: 5, Current: 72, Target: 50, Ratio: 1.44, RebalancedRatio: 1.44, ReadyPods: 3, UnreadyPods: 1, MissingPods: 2, IgnoredPods: 4},
				{Name: "queue", Outcome: engine.OutcomeFailed, Err: "boom"},
			},
			Steps: []engine.Step{{Kind: engine.StepLimited, From: 6, To: 5, Reason: "ScaleUpLimit", Message: "m3"}},
		},
	}
	got := convert.Decision(target.LastDecision{ID: "id", At: t0, Decision: d})
	want := &setpointv1.Decision{
		DecisionId: "id", DecisionTime: timestamppb.New(t0), DesiredReplicas: 5, Rescale: true, Error: "some metric failed",
		Status: &setpointv1.HorizontalPodAutoscalerStatus{
			CurrentReplicas: 3, DesiredReplicas: 5, LastScaleTime: timestamppb.New(t0),
			CurrentMetrics: []*setpointv1.MetricStatus{
				{Type: "Resource", Resource: &setpointv1.ResourceMetricStatus{Name: "cpu", Current: &setpointv1.MetricValueStatus{AverageUtilization: &util, AverageValue: "360m"}}},
				{Type: ""},
			},
			Conditions: []*setpointv1.Condition{
				{Type: "AbleToScale", Status: "True", Reason: "SucceededRescale", Message: "m1", LastTransitionTime: timestamppb.New(t0.Add(-time.Minute + 5))},
				{Type: "ScalingActive", Status: "False", Reason: "FailedGetResourceMetric", Message: "m2"},
			},
		},
		Explanation: &setpointv1.Explanation{
			CurrentReplicas: 3, Winner: 0, Proposal: 5,
			Metrics: []*setpointv1.MetricExplanation{
				{Name: "cpu", Outcome: "Scaled", Proposal: 5, Current: 72, Target: 50, Ratio: 1.44, RebalancedRatio: 1.44, ReadyPods: 3, UnreadyPods: 1, MissingPods: 2, IgnoredPods: 4},
				{Name: "queue", Outcome: "Failed", Error: "boom"},
			},
			Steps: []*setpointv1.Step{{Kind: "Limited", From: 6, To: 5, Reason: "ScaleUpLimit", Message: "m3"}},
		},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("Decision (-want +got):\n%s", diff)
	}
	// Recommend's response, in memory that held other responses before:
	// larger and smaller ones, of every metric source type.
	var r convert.Response
	wide := d
	wide.Status.CurrentMetrics = nil
	for _, typ := range []engine.MetricSourceType{engine.ResourceSource, engine.ContainerResourceSource, engine.PodsSource, engine.ObjectSource, engine.ExternalSource, engine.ResourceSource} {
		wide.Status.CurrentMetrics = append(wide.Status.CurrentMetrics, engine.MetricStatus{Type: typ, Resource: "memory", Container: "app",
			Metric: engine.MetricIdentifier{Name: "m", Selector: &engine.LabelSelector{MatchLabels: map[string]string{"a": "b"}}},
			Value:  &engine.Quantity{Milli: 5}, DescribedObject: engine.ObjectReference{Kind: "Service", Name: "web"}})
	}
	wide.Status.Conditions = append(wide.Status.Conditions, wide.Status.Conditions...)
	wide.Explanation.Steps = append(wide.Explanation.Steps, wide.Explanation.Steps...)
	for _, dd := range []engine.Decision{d, wide, {}, d, wide, wide, {}, d} {
		checkResponse(t, target.LastDecision{ID: "id", At: t0, Decision: dd}, &r)
	}
	checkResponse(t, target.LastDecision{}, &r)
}

// TestResourceLists: a container's requests become a list sorted by name
// whatever names the map holds — only common resources (looked up by
// name), common and other ones, other ones only — and violations come in
// name order.
func TestResourceLists(t *testing.T) {
	tests := []struct {
		name     string
		requests map[string]string
		want     engine.ResourceList
		fields   []string // the violations' fields, in order; none when want is set
	}{
		{"cpu", map[string]string{"cpu": "500m"}, engine.ResourceList{{Name: "cpu", Milli: 500}}, nil},
		{"common", map[string]string{"memory": "1Gi", "cpu": "1", "ephemeral-storage": "2"},
			engine.ResourceList{{Name: "cpu", Milli: 1000}, {Name: "ephemeral-storage", Milli: 2000}, {Name: "memory", Milli: 1 << 30 * 1000}}, nil},
		{"common and other", map[string]string{"memory": "1", "example.com/gpu": "2", "cpu": "3"},
			engine.ResourceList{{Name: "cpu", Milli: 3000}, {Name: "example.com/gpu", Milli: 2000}, {Name: "memory", Milli: 1000}}, nil},
		{"other only", map[string]string{"hugepages-2Mi": "4", "example.com/gpu": "2"},
			engine.ResourceList{{Name: "example.com/gpu", Milli: 2000}, {Name: "hugepages-2Mi", Milli: 4000}}, nil},
		{"common violations in name order", map[string]string{"memory": "-1", "cpu": "x"}, nil,
			[]string{`pods[0].containers[0].requests["cpu"]`, `pods[0].containers[0].requests["memory"]`}},
		{"mixed violations in name order", map[string]string{"memory": "-1", "example.com/gpu": "-2", "cpu": "1"}, nil,
			[]string{`pods[0].containers[0].requests["example.com/gpu"]`, `pods[0].containers[0].requests["memory"]`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := minimalRequest()
			req.Pods = []*setpointv1.Pod{{Name: "a", Phase: "Running", Containers: []*setpointv1.Container{{Name: "c", Requests: tt.requests}}}}
			in, err := convert.Input(req, t0)
			if tt.fields != nil {
				var ve *setpointv1.ValidationError
				if !errors.As(err, &ve) {
					t.Fatalf("Input error = %v, want a *ValidationError", err)
				}
				var got []string
				for _, v := range ve.Violations {
					got = append(got, v.Field)
				}
				if !slices.Equal(got, tt.fields) {
					t.Errorf("violations at %q, want %q", got, tt.fields)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := in.Pods[0].Containers[0].Requests; !slices.Equal(got, tt.want) {
				t.Errorf("requests = %v, want %v", got, tt.want)
			}
		})
	}
}
