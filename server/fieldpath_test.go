package server

import (
	"context"
	"errors"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/setpointhq/setpoint/engine"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/admission"
	"github.com/setpointhq/setpoint/server/convert"
	"github.com/setpointhq/setpoint/server/simulate"
	"github.com/setpointhq/setpoint/server/watch"
)

// TestViolationPathsExist walks every field of well-formed requests,
// changes each (one at a time) to values a validator may refuse, and
// checks that every violation any validator reports — the requests' own
// Validate, server/convert, Simulate's checks, the request limits, and the
// engine's field errors as the server maps them — names a field (or oneof)
// that exists in the request's proto descriptor.
func TestViolationPathsExist(t *testing.T) {
	seen := map[string]map[string]bool{} // message → path templates seen
	check := func(t *testing.T, md protoreflect.MessageDescriptor, from string, err error) {
		t.Helper()
		var ve *setpointv1.ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: %v is not a ValidationError", from, err)
			return
		}
		for _, v := range ve.Violations {
			if got := fieldPrefix(md, v.Field); got != v.Field || v.Field == "" {
				t.Errorf("%s names %q, not a field of %s (longest field: %q)", from, v.Field, md.FullName(), got)
			}
			if seen[string(md.Name())] == nil {
				seen[string(md.Name())] = map[string]bool{}
			}
			seen[string(md.Name())][template(v.Field)] = true
		}
	}
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	limits := admission.RequestLimits{MaxPods: 1, MaxMetrics: 1}

	t.Run("Recommend", func(t *testing.T) {
		md := recommendRequest
		valid := fullRequest(now)
		if _, err := convert.Input(valid, now); err != nil {
			t.Fatalf("the well-formed request is refused: %v", err)
		}
		for _, m := range mutations(valid) {
			req := m.(*setpointv1.RecommendRequest)
			if err := req.Validate(); err != nil {
				check(t, md, "Validate", err)
			}
			if err := limits.Check(req); err != nil {
				check(t, md, "request limits", badRequestError(err))
			}
			in, err := convert.Input(req, now)
			if err != nil {
				check(t, md, "convert", err)
				continue
			}
			if err := engine.Validate(in); err != nil {
				check(t, md, "engine", engineViolation(t, err))
			}
		}
	})

	t.Run("Simulate", func(t *testing.T) {
		md := (&setpointv1.SimulateRequest{}).ProtoReflect().Descriptor()
		for _, valid := range []*setpointv1.SimulateRequest{fullSimulation(now), podModelSimulation(now)} {
			if _, err := simulate.New(valid, simulate.Limits{MaxSteps: 10, MaxPods: 10}); err != nil {
				t.Fatalf("the well-formed simulation is refused: %v", err)
			}
			for _, m := range mutations(valid) {
				req := m.(*setpointv1.SimulateRequest)
				if err := limits.Check(req); err != nil {
					check(t, md, "request limits", badRequestError(err))
				}
				sim, err := simulate.New(req, simulate.Limits{MaxSteps: 10, MaxPods: 10})
				if err != nil {
					check(t, md, "simulate", err)
					continue
				}
				if _, err := sim.Run(context.Background()); err != nil {
					err = simulateError(err)
					var fe *engine.FieldError
					if errors.As(err, &fe) {
						t.Errorf("simulate run: engine error %v not mapped to a field", err)
						continue
					}
					check(t, md, "simulate run", err)
				}
			}
		}
	})

	t.Run("others", func(t *testing.T) {
		key := &setpointv1.TargetKey{Cluster: "c", Namespace: "ns", Name: "web"}
		for _, valid := range []interface {
			proto.Message
			Validate() error
		}{
			&setpointv1.ObserveRequest{Target: key, DecisionId: "d", Change: &setpointv1.ObserveRequest_Applied{Applied: &setpointv1.AppliedChange{From: 1, To: 2}}},
			&setpointv1.ObserveRequest{Target: key, DecisionId: "d", Change: &setpointv1.ObserveRequest_Failed{Failed: &setpointv1.FailedChange{To: 2, Message: "m"}}},
			&setpointv1.ObserveRequest{Target: key, Change: &setpointv1.ObserveRequest_External{External: &setpointv1.ExternalChange{From: 1, To: 2}}},
			&setpointv1.GetTargetRequest{Target: key},
			&setpointv1.DeleteTargetRequest{Target: key},
			&setpointv1.ListTargetsRequest{Cluster: "c", Namespace: "ns", PageSize: 10},
		} {
			md := valid.ProtoReflect().Descriptor()
			for _, m := range mutations(valid) {
				if err := m.(interface{ Validate() error }).Validate(); err != nil {
					check(t, md, "Validate", err)
				}
			}
		}
		md := (&setpointv1.WatchRequest{}).ProtoReflect().Descriptor()
		for _, m := range mutations(&setpointv1.WatchRequest{Cluster: "c", Namespace: "ns", Name: "web"}) {
			if err := watch.Validate(m.(*setpointv1.WatchRequest)); err != nil {
				check(t, md, "validateWatch", err)
			}
		}
	})

	for msg, paths := range seen {
		t.Logf("%s: %d violation paths, e.g. %s", msg, len(paths), strings.Join(slices.Sorted(func(yield func(string) bool) {
			for p := range paths {
				if !yield(p) {
					return
				}
			}
		})[:min(8, len(paths))], ", "))
	}
	if len(seen["RecommendRequest"]) < 40 || len(seen["SimulateRequest"]) < 40 {
		t.Errorf("too few violation paths reached: %d of RecommendRequest, %d of SimulateRequest", len(seen["RecommendRequest"]), len(seen["SimulateRequest"]))
	}
}

// TestEngineFieldsMapped: every field error the engine can report on an
// input converted from a request maps to a field of RecommendRequest,
// except the engine's own "now" and the stored "status", which are not the
// caller's (Internal).
func TestEngineFieldsMapped(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	in, err := convert.Input(fullRequest(now), now)
	if err != nil {
		t.Fatal(err)
	}
	in.Status = engine.Status{DesiredReplicas: 2, Conditions: []engine.Condition{{Type: engine.AbleToScale, Status: engine.ConditionTrue}}}
	if err := engine.Validate(in); err != nil {
		t.Fatalf("the well-formed input is refused: %v", err)
	}
	fields := map[string]string{}
	for _, bad := range engineMutations(in) {
		err := engine.Validate(bad)
		var fe *engine.FieldError
		if !errors.As(err, &fe) {
			continue
		}
		got := apiField(fe.Field, recommendRequest)
		fields[template(fe.Field)] = template(got)
		internal := fe.Field == "now" || strings.HasPrefix(fe.Field, "status.")
		switch {
		case internal && got != "":
			t.Errorf("engine field %q maps to %q, want none (not the caller's)", fe.Field, got)
		case !internal && got == "":
			t.Errorf("engine field %q maps to no field of the request", fe.Field)
		case !internal && fieldPrefix(recommendRequest, got) != got:
			t.Errorf("engine field %q maps to %q, not a field", fe.Field, got)
		}
	}
	if len(fields) < 30 {
		t.Errorf("only %d engine field paths reached: %v", len(fields), fields)
	}
	t.Logf("%d engine field paths, e.g. resourceMetrics.pods[N].pod → %s", len(fields), fields["resourceMetrics.pods[N].pod"])
}

// TestFieldPrefix: paths are read against the descriptor, indexes only on
// lists, quoted keys only on maps.
func TestFieldPrefix(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"spec.min_replicas", "spec.min_replicas"},
		{"spec.minReplicas", "spec"},
		{"spec.metrics[2].external.target.average_value", "spec.metrics[2].external.target.average_value"},
		{"spec.metrics[2].target.utilization", "spec.metrics[2]"},
		{"resource_metrics.pods[0].pod", "resource_metrics"},
		{"resource_metrics.items[0].containers[1].usage[\"cpu\"]", "resource_metrics.items[0].containers[1].usage[\"cpu\"]"},
		{"pods[0].requests[cpu]", "pods[0].requests"},
		{"pods[\"x\"]", "pods"},
		{"spec[0]", "spec"},
		{"pods[-1]", "pods"},
		{"pods", "pods"},
		{"pods.name", "pods"},
		{"now", ""},
		{"status.desired_replicas", ""},
	} {
		if got := fieldPrefix(recommendRequest, tc.path); got != tc.want {
			t.Errorf("fieldPrefix(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
	observe := (&setpointv1.ObserveRequest{}).ProtoReflect().Descriptor()
	if got := fieldPrefix(observe, "change"); got != "change" {
		t.Errorf("a oneof: got %q", got)
	}
}

// template replaces indexes and map keys by N and K.
func template(path string) string {
	return subscripts.ReplaceAllStringFunc(path, func(s string) string {
		if strings.HasPrefix(s, `["`) {
			return "[K]"
		}
		return "[N]"
	})
}

var subscripts = regexp.MustCompile(`\[("(?:[^"\\]|\\.)*"|[^\]]*)\]`)

// badRequestError reads a BadRequest status back as a ValidationError.
func badRequestError(err error) error {
	out := &setpointv1.ValidationError{}
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				out.Add(v.GetField(), "%s", v.GetDescription())
			}
		}
	}
	return out
}

// engineViolation maps an engine field error as toStatus does.
func engineViolation(t *testing.T, err error) error {
	t.Helper()
	var fe *engine.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("engine: %v is not a FieldError", err)
	}
	out := &setpointv1.ValidationError{}
	out.Add(apiField(fe.Field, recommendRequest), "%s", fe.Reason)
	return out
}

// fullRequest is a well-formed request that sets every field at least
// once: every metric source, both behavior directions, settings, pods with
// every kind of container, resource metrics and observations.
func fullRequest(now time.Time) *setpointv1.RecommendRequest {
	ts := timestamppb.New(now.Add(-time.Minute))
	target := func(typ string) *setpointv1.MetricTarget {
		switch typ {
		case "Utilization":
			u := int32(60)
			return &setpointv1.MetricTarget{Type: typ, AverageUtilization: &u}
		case "Value":
			return &setpointv1.MetricTarget{Type: typ, Value: "10"}
		}
		return &setpointv1.MetricTarget{Type: typ, AverageValue: "100m"}
	}
	sel := &setpointv1.LabelSelector{MatchLabels: map[string]string{"a": "b"},
		MatchExpressions: []*setpointv1.LabelSelectorRequirement{{Key: "k", Operator: "In", Values: []string{"v"}}}}
	minR, window, tol := int32(1), int32(60), 0.1
	rules := func() *setpointv1.ScalingRules {
		return &setpointv1.ScalingRules{StabilizationWindowSeconds: &window, SelectPolicy: "Max", Tolerance: "50m",
			Policies: []*setpointv1.ScalingPolicy{{Type: "Pods", Value: 2, PeriodSeconds: 30}}}
	}
	pod := func(name string) *setpointv1.Pod {
		return &setpointv1.Pod{Name: name, Phase: "Running", StartTime: ts,
			Ready:      &setpointv1.PodReadyCondition{Status: "True", LastTransitionTime: ts},
			Containers: []*setpointv1.Container{{Name: "app", Requests: map[string]string{"cpu": "500m", "memory": "1Gi"}}, {Name: "init", Init: true, Requests: map[string]string{"cpu": "1"}}, {Name: "side", RestartableInit: true}},
			Requests:   map[string]string{"cpu": "1"}, Overhead: map[string]string{"cpu": "10m"}}
	}
	return &setpointv1.RecommendRequest{
		Target: &setpointv1.TargetKey{Cluster: "c", Namespace: "ns", Name: "web"},
		Spec: &setpointv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: &setpointv1.CrossVersionObjectReference{ApiVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    &minR, MaxReplicas: 10,
			Metrics: []*setpointv1.MetricSpec{
				{Type: "Resource", Resource: &setpointv1.ResourceMetricSource{Name: "cpu", Target: target("Utilization")}},
				{Type: "ContainerResource", ContainerResource: &setpointv1.ContainerResourceMetricSource{Name: "memory", Container: "app", Target: target("AverageValue")}},
				{Type: "Pods", Pods: &setpointv1.PodsMetricSource{Metric: &setpointv1.MetricIdentifier{Name: "rps", Selector: sel}, Target: target("AverageValue")}},
				{Type: "Object", Object: &setpointv1.ObjectMetricSource{DescribedObject: &setpointv1.CrossVersionObjectReference{ApiVersion: "v1", Kind: "Service", Name: "s"},
					Metric: &setpointv1.MetricIdentifier{Name: "hits"}, Target: target("Value")}},
				{Type: "External", External: &setpointv1.ExternalMetricSource{Metric: &setpointv1.MetricIdentifier{Name: "queue", Selector: sel}, Target: target("AverageValue")}},
			},
			Behavior: &setpointv1.HorizontalPodAutoscalerBehavior{ScaleUp: rules(), ScaleDown: rules()},
			Fallback: &setpointv1.Fallback{FailureDuration: durationpb.New(time.Minute), Behavior: "static", Replicas: 3},
			// Closed at now: the converted input has no proposal.
			Schedules: []*setpointv1.ScheduleWindow{
				{Name: "night", TimeZone: "Europe/Berlin", Start: "0 2 * * *", End: "0 4 * * *", MinReplicas: 2},
				{Name: "batch", TimeZone: "UTC", Start: "@weekly", Duration: durationpb.New(time.Hour), MinReplicas: 4},
			},
			Forecast: &setpointv1.Forecast{LeadTime: durationpb.New(10 * time.Minute), MaxError: 0.2},
		},
		PodStartup: durationpb.New(2 * time.Minute),
		Settings: &setpointv1.ControllerSettings{Tolerance: &tol, CpuInitializationPeriod: durationpb.New(time.Minute),
			InitialReadinessDelay: durationpb.New(time.Second), DownscaleStabilizationWindow: durationpb.New(time.Minute)},
		Scale: &setpointv1.Scale{Replicas: 2, StatusReplicas: 2, Selector: "app=web"},
		Pods:  []*setpointv1.Pod{pod("p1"), pod("p2")},
		ResourceMetrics: &setpointv1.ResourceMetrics{Items: []*setpointv1.PodMetrics{{Pod: "p1", Timestamp: ts, Window: durationpb.New(15 * time.Second),
			Containers: []*setpointv1.ContainerMetrics{{Name: "app", Usage: map[string]string{"cpu": "400m", "memory": "512Mi"}}}}}},
		Observations: []*setpointv1.MetricObservation{
			{}, {},
			{Values: []*setpointv1.MetricValue{{Pod: "p1", Value: "120m", Timestamp: ts, Window: durationpb.New(time.Minute)}}},
			{Values: []*setpointv1.MetricValue{{Value: "7", Timestamp: ts}}},
			{Values: []*setpointv1.MetricValue{{Value: "3", Timestamp: ts}}, Error: ""},
		},
	}
}

// fullSimulation replays fullRequest over two steps, the second editing
// the spec.
func fullSimulation(now time.Time) *setpointv1.SimulateRequest {
	r := fullRequest(now)
	edit := proto.Clone(r.Spec).(*setpointv1.HorizontalPodAutoscalerSpec)
	edit.MaxReplicas = 20
	step := func(at time.Time, spec *setpointv1.HorizontalPodAutoscalerSpec) *setpointv1.SimulateStep {
		return &setpointv1.SimulateStep{Time: timestamppb.New(at), Spec: spec, Scale: r.Scale, Pods: r.Pods, ResourceMetrics: r.ResourceMetrics, Observations: r.Observations}
	}
	return &setpointv1.SimulateRequest{Spec: r.Spec, Settings: r.Settings, Steps: []*setpointv1.SimulateStep{step(now, nil), step(now.Add(time.Minute), edit)},
		SeedFrom: &setpointv1.TargetKey{Cluster: "c", Namespace: "ns", Name: "web"}}
}

// podModelSimulation is a simulation with a pod model and a spec edit.
func podModelSimulation(now time.Time) *setpointv1.SimulateRequest {
	r := fullRequest(now)
	edit := proto.Clone(r.Spec).(*setpointv1.HorizontalPodAutoscalerSpec)
	edit.Metrics = edit.Metrics[:2]
	values := []string{"400m", "200Mi", "1", "2", "3"}
	return &setpointv1.SimulateRequest{Spec: r.Spec, Settings: r.Settings,
		PodModel: &setpointv1.PodModel{InitialReplicas: 2, Requests: map[string]string{"cpu": "500m", "memory": "1Gi"}, ReadyAfter: durationpb.New(time.Second)},
		Steps: []*setpointv1.SimulateStep{
			{Time: timestamppb.New(now), MetricValues: values, Scale: &setpointv1.Scale{Replicas: 2}},
			{Time: timestamppb.New(now.Add(time.Minute)), Spec: edit, MetricValues: values[:2]},
		}}
}

// mutations returns copies of msg, each with one field (at any depth)
// cleared or set to a value a validator may refuse; list and map fields
// also get an extra or duplicated entry.
func mutations(msg proto.Message) []proto.Message {
	var out []proto.Message
	edit := func(nav func(protoreflect.Message) protoreflect.Message, change func(protoreflect.Message)) {
		c := proto.Clone(msg)
		change(nav(c.ProtoReflect()))
		out = append(out, c)
	}
	var walk func(m protoreflect.Message, nav func(protoreflect.Message) protoreflect.Message)
	walk = func(m protoreflect.Message, nav func(protoreflect.Message) protoreflect.Message) {
		fields := m.Descriptor().Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			edit(nav, func(p protoreflect.Message) { p.Clear(fd) })
			switch {
			case fd.IsList():
				l := m.Get(fd).List()
				edit(nav, func(p protoreflect.Message) {
					pl := p.Mutable(fd).List()
					if fd.Message() != nil {
						pl.Append(protoreflect.ValueOfMessage(pl.NewElement().Message()))
					} else {
						pl.Append(pl.NewElement())
					}
				})
				if l.Len() > 0 {
					edit(nav, func(p protoreflect.Message) {
						pl := p.Mutable(fd).List()
						if fd.Message() != nil {
							pl.Append(protoreflect.ValueOfMessage(proto.Clone(pl.Get(0).Message().Interface()).ProtoReflect()))
						} else {
							pl.Append(pl.Get(0))
						}
					})
				}
				for j := range l.Len() {
					if fd.Message() != nil {
						walk(l.Get(j).Message(), func(r protoreflect.Message) protoreflect.Message {
							return nav(r).Mutable(fd).List().Get(j).Message()
						})
						continue
					}
					for _, v := range scalars(fd) {
						edit(nav, func(p protoreflect.Message) { p.Mutable(fd).List().Set(j, v) })
					}
				}
			case fd.IsMap():
				mp := m.Get(fd).Map()
				if fd.MapValue().Message() == nil {
					for _, v := range scalars(fd.MapValue()) {
						edit(nav, func(p protoreflect.Message) {
							p.Mutable(fd).Map().Set(protoreflect.ValueOfString("").MapKey(), v)
						})
						mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
							edit(nav, func(p protoreflect.Message) { p.Mutable(fd).Map().Set(k, v) })
							return true
						})
					}
				}
			case fd.Message() != nil:
				edit(nav, func(p protoreflect.Message) { p.Set(fd, protoreflect.ValueOfMessage(p.NewField(fd).Message())) })
				if m.Has(fd) {
					walk(m.Get(fd).Message(), func(r protoreflect.Message) protoreflect.Message {
						return nav(r).Mutable(fd).Message()
					})
				}
			default:
				for _, v := range scalars(fd) {
					edit(nav, func(p protoreflect.Message) { p.Set(fd, v) })
				}
			}
		}
	}
	walk(msg.ProtoReflect(), func(r protoreflect.Message) protoreflect.Message { return r })
	return out
}

// scalars are the values tried for a scalar field.
func scalars(fd protoreflect.FieldDescriptor) []protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return []protoreflect.Value{protoreflect.ValueOfInt32(-1), protoreflect.ValueOfInt32(0), protoreflect.ValueOfInt32(math.MaxInt32)}
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return []protoreflect.Value{protoreflect.ValueOfInt64(-1), protoreflect.ValueOfInt64(0), protoreflect.ValueOfInt64(math.MaxInt64)}
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return []protoreflect.Value{protoreflect.ValueOfUint32(0), protoreflect.ValueOfUint32(math.MaxUint32)}
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return []protoreflect.Value{protoreflect.ValueOfUint64(0), protoreflect.ValueOfUint64(math.MaxUint64)}
	case protoreflect.DoubleKind:
		return []protoreflect.Value{protoreflect.ValueOfFloat64(-1), protoreflect.ValueOfFloat64(math.NaN()), protoreflect.ValueOfFloat64(math.Inf(1))}
	case protoreflect.FloatKind:
		return []protoreflect.Value{protoreflect.ValueOfFloat32(-1)}
	case protoreflect.BoolKind:
		return []protoreflect.Value{protoreflect.ValueOfBool(true), protoreflect.ValueOfBool(false)}
	case protoreflect.StringKind:
		var out []protoreflect.Value
		for _, s := range []string{"", "bogus", "-1", "0", "1e30", "a/b", "x\x00", strings.Repeat("x", 300)} {
			out = append(out, protoreflect.ValueOfString(s))
		}
		return out
	case protoreflect.EnumKind:
		return []protoreflect.Value{protoreflect.ValueOfEnum(99)}
	}
	return nil
}

// engineMutations returns copies of in, each with one field (at any
// depth) set to a zero, negative or unknown value.
func engineMutations(in engine.Input) []engine.Input {
	var out []engine.Input
	var walk func(v reflect.Value, set func(root *engine.Input) reflect.Value)
	try := func(set func(root *engine.Input) reflect.Value, change func(reflect.Value)) {
		c := deepCopy(in)
		change(set(&c))
		out = append(out, c)
	}
	walk = func(v reflect.Value, get func(root *engine.Input) reflect.Value) {
		switch v.Kind() {
		case reflect.Struct:
			if v.Type() == reflect.TypeOf(time.Time{}) {
				try(get, func(x reflect.Value) { x.Set(reflect.Zero(x.Type())) })
				return
			}
			for i := range v.NumField() {
				if !v.Type().Field(i).IsExported() {
					continue
				}
				walk(v.Field(i), func(r *engine.Input) reflect.Value { return get(r).Field(i) })
			}
		case reflect.Pointer:
			if v.IsNil() {
				return
			}
			try(get, func(x reflect.Value) { x.Set(reflect.Zero(x.Type())) })
			walk(v.Elem(), func(r *engine.Input) reflect.Value { return get(r).Elem() })
		case reflect.Slice:
			try(get, func(x reflect.Value) { x.Set(reflect.Zero(x.Type())) })
			for j := range v.Len() {
				walk(v.Index(j), func(r *engine.Input) reflect.Value { return get(r).Index(j) })
			}
		case reflect.Map:
			if v.Type().Elem().Kind() == reflect.Int64 {
				try(get, func(x reflect.Value) {
					if x.IsNil() {
						x.Set(reflect.MakeMap(x.Type()))
					}
					x.SetMapIndex(reflect.ValueOf(""), reflect.ValueOf(int64(1)))
				})
				for _, k := range v.MapKeys() {
					try(get, func(x reflect.Value) { x.SetMapIndex(k, reflect.ValueOf(int64(-1))) })
				}
			}
		case reflect.String:
			try(get, func(x reflect.Value) { x.SetString("") })
			try(get, func(x reflect.Value) { x.SetString("bogus") })
		case reflect.Int, reflect.Int32, reflect.Int64:
			if v.Type() == reflect.TypeOf(time.Duration(0)) {
				try(get, func(x reflect.Value) { x.SetInt(-1) })
				return
			}
			try(get, func(x reflect.Value) { x.SetInt(-1) })
			try(get, func(x reflect.Value) { x.SetInt(0) })
			try(get, func(x reflect.Value) { x.SetInt(math.MaxInt32) })
		case reflect.Float64:
			try(get, func(x reflect.Value) { x.SetFloat(math.NaN()) })
			try(get, func(x reflect.Value) { x.SetFloat(-1) })
		}
	}
	walk(reflect.ValueOf(in), func(r *engine.Input) reflect.Value { return reflect.ValueOf(r).Elem() })
	return out
}

// deepCopy copies an engine input so that no slice, map or pointer is
// shared with in.
func deepCopy(in engine.Input) engine.Input {
	var cp func(v reflect.Value) reflect.Value
	cp = func(v reflect.Value) reflect.Value {
		out := reflect.New(v.Type()).Elem()
		switch v.Kind() {
		case reflect.Struct:
			if v.Type() == reflect.TypeOf(time.Time{}) {
				out.Set(v)
				break
			}
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					out.Field(i).Set(cp(v.Field(i)))
				}
			}
		case reflect.Pointer:
			if !v.IsNil() {
				out.Set(reflect.New(v.Type().Elem()))
				out.Elem().Set(cp(v.Elem()))
			}
		case reflect.Slice:
			if !v.IsNil() {
				out.Set(reflect.MakeSlice(v.Type(), v.Len(), v.Len()))
				for i := range v.Len() {
					out.Index(i).Set(cp(v.Index(i)))
				}
			}
		case reflect.Map:
			if !v.IsNil() {
				out.Set(reflect.MakeMap(v.Type()))
				for _, k := range v.MapKeys() {
					out.SetMapIndex(k, cp(v.MapIndex(k)))
				}
			}
		default:
			out.Set(v)
		}
		return out
	}
	return cp(reflect.ValueOf(in)).Interface().(engine.Input)
}
