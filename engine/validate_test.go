package engine_test

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/engine"
)

// validInput has a pod, a resource sample, two metrics and a behavior, so
// that each case below breaks exactly one field.
func validInput() engine.Input {
	in := input(2, cpuUtilization(50), podsMetric("qps", 100))
	in.Pods = []engine.Pod{cpuPod("a", 1000), cpuPod("b", 1000)}
	in.ResourceMetrics.Pods = []engine.PodUsage{cpuUsage("a", 500), cpuUsage("b", 500)}
	in.Observations[1] = podValues("a", 100, "b", 100)
	in.Spec.Behavior = behavior()
	return in
}

func TestValidate(t *testing.T) {
	if err := engine.Validate(validInput()); err != nil {
		t.Fatalf("Validate(validInput()) = %v", err)
	}
	cases := []struct {
		name      string
		mutate    func(*engine.Input)
		wantField string
	}{
		{"zero now", func(in *engine.Input) { in.Now = time.Time{} }, "now"},
		{"negative replicas", func(in *engine.Input) { in.Scale.Replicas = -1 }, "scale.replicas"},
		{"negative status replicas", func(in *engine.Input) { in.Scale.StatusReplicas = -1 }, "scale.statusReplicas"},
		{"negative min", func(in *engine.Input) { in.Spec.MinReplicas = -1 }, "spec.minReplicas"},
		{"min above max", func(in *engine.Input) { in.Spec.MinReplicas, in.Spec.MaxReplicas = 5, 3 }, "spec.minReplicas"},
		{"max 0", func(in *engine.Input) { in.Spec.MinReplicas, in.Spec.MaxReplicas = 0, 0 }, "spec.maxReplicas"},
		{"no metrics", func(in *engine.Input) { in.Spec.Metrics, in.Observations = nil, nil }, "spec.metrics"},
		{"min 0 without Object or External", func(in *engine.Input) { in.Spec.MinReplicas = 0 }, "spec.minReplicas"},
		{"utilization target 0", func(in *engine.Input) { in.Spec.Metrics[0].Target.Utilization = 0 }, "spec.metrics[0].target.utilization"},
		{"negative utilization target", func(in *engine.Input) { in.Spec.Metrics[0].Target.Utilization = -5 }, "spec.metrics[0].target.utilization"},
		{"average value target 0", func(in *engine.Input) { in.Spec.Metrics[1].Target.Milli = 0 }, "spec.metrics[1].target.milli"},
		{"unknown metric type", func(in *engine.Input) { in.Spec.Metrics[1].Type = "Custom" }, "spec.metrics[1].type"},
		{"Utilization target on a Pods metric", func(in *engine.Input) {
			in.Spec.Metrics[1].Target = engine.Target{Type: engine.UtilizationTarget, Utilization: 50}
		}, "spec.metrics[1].target.type"},
		{"Value target on a Resource metric", func(in *engine.Input) {
			in.Spec.Metrics[0].Target = engine.Target{Type: engine.ValueTarget, Milli: 50}
		}, "spec.metrics[0].target.type"},
		{"empty target type", func(in *engine.Input) { in.Spec.Metrics[0].Target.Type = "" }, "spec.metrics[0].target.type"},
		{"resource metric without resource", func(in *engine.Input) { in.Spec.Metrics[0].Resource = "" }, "spec.metrics[0].resource"},
		{"container metric without container", func(in *engine.Input) { in.Spec.Metrics[0].Type = engine.ContainerResourceSource }, "spec.metrics[0].container"},
		{"pods metric without name", func(in *engine.Input) { in.Spec.Metrics[1].Metric.Name = "" }, "spec.metrics[1].metric.name"},
		{"object metric without described object", func(in *engine.Input) {
			in.Spec.Metrics[1] = objectMetric("rps", engine.ValueTarget, 1)
			in.Spec.Metrics[1].DescribedObject.Name = ""
			in.Observations[1] = values(1)
		}, "spec.metrics[1].describedObject.name"},
		{"NaN tolerance", func(in *engine.Input) { in.Settings.Tolerance = math.NaN() }, "settings.tolerance"},
		{"infinite tolerance", func(in *engine.Input) { in.Settings.Tolerance = math.Inf(1) }, "settings.tolerance"},
		{"negative tolerance", func(in *engine.Input) { in.Settings.Tolerance = -0.1 }, "settings.tolerance"},
		{"NaN scale-up tolerance", func(in *engine.Input) { in.Spec.Behavior.ScaleUp.Tolerance = math.NaN() }, "spec.behavior.scaleUp.tolerance"},
		{"negative cpu initialization period", func(in *engine.Input) { in.Settings.CPUInitializationPeriod = -time.Second }, "settings.cpuInitializationPeriod"},
		{"negative readiness delay", func(in *engine.Input) { in.Settings.InitialReadinessDelay = -time.Second }, "settings.initialReadinessDelay"},
		{"negative downscale window", func(in *engine.Input) { in.Settings.DownscaleStabilizationWindow = -time.Second }, "settings.downscaleStabilizationWindow"},
		{"pod without a name", func(in *engine.Input) { in.Pods[1].Name = "" }, "pods[1].name"},
		{"duplicate pod names", func(in *engine.Input) { in.Pods[1].Name = "a" }, "pods[1].name"},
		{"unknown pod phase", func(in *engine.Input) { in.Pods[0].Phase = "Crashing" }, "pods[0].phase"},
		{"unknown readiness status", func(in *engine.Input) { in.Pods[0].Ready.Status = "Maybe" }, "pods[0].ready.status"},
		{"negative request", func(in *engine.Input) { in.Pods[0].Containers[0].Requests[0].Milli = -1 }, "pods[0].containers[0].requests[cpu]"},
		{"negative pod-level request", func(in *engine.Input) { in.Pods[0].Requests = engine.ResourceListOf(map[string]int64{"memory": -1}) }, "pods[0].requests[memory]"},
		{"request without a resource name", func(in *engine.Input) {
			in.Pods[0].Containers[0].Requests = engine.ResourceList{{Name: "cpu", Milli: 1}, {Milli: 1}}
		}, "pods[0].containers[0].requests"},
		{"resource requested twice", func(in *engine.Input) {
			in.Pods[1].Containers[0].Requests = engine.ResourceList{{Name: "cpu", Milli: 1}, {Name: "memory", Milli: 1}, {Name: "cpu", Milli: 2}}
		}, "pods[1].containers[0].requests[cpu]"},
		{"pod-level resource requested twice", func(in *engine.Input) {
			in.Pods[0].Requests = engine.ResourceList{{Name: "memory", Milli: 1}, {Name: "memory", Milli: 1}}
		}, "pods[0].requests[memory]"},
		{"negative overhead", func(in *engine.Input) { in.Pods[1].Overhead = engine.ResourceList{{Name: "cpu", Milli: -1}} }, "pods[1].overhead[cpu]"},
		{"overhead named twice", func(in *engine.Input) {
			in.Pods[0].Overhead = engine.ResourceList{{Name: "cpu", Milli: 1}, {Name: "cpu", Milli: 1}}
		}, "pods[0].overhead[cpu]"},
		{"usage named twice", func(in *engine.Input) {
			in.ResourceMetrics.Pods[1].Containers[0].Usage = engine.ResourceList{{Name: "cpu", Milli: 1}, {Name: "cpu", Milli: 1}}
		}, "resourceMetrics.pods[1].containers[0].usage[cpu]"},
		{"many resources, one named twice", func(in *engine.Input) {
			var l engine.ResourceList
			for i := range 40 {
				l = append(l, engine.ResourceQuantity{Name: fmt.Sprintf("example.com/r%d", i%39), Milli: 1})
			}
			in.Pods[0].Containers[0].Requests = l
		}, "pods[0].containers[0].requests[example.com/r0]"},
		{"container without a name", func(in *engine.Input) { in.Pods[0].Containers[0].Name = "" }, "pods[0].containers[0].name"},
		{"sample without a pod", func(in *engine.Input) { in.ResourceMetrics.Pods[1].Pod = "" }, "resourceMetrics.pods[1].pod"},
		{"negative sample window", func(in *engine.Input) { in.ResourceMetrics.Pods[0].Window = -time.Second }, "resourceMetrics.pods[0].window"},
		{"negative usage", func(in *engine.Input) { in.ResourceMetrics.Pods[0].Containers[0].Usage[0].Milli = -1 }, "resourceMetrics.pods[0].containers[0].usage[cpu]"},
		{"fewer observations than metrics", func(in *engine.Input) { in.Observations = in.Observations[:1] }, "observations"},
		{"more observations than metrics", func(in *engine.Input) { in.Observations = append(in.Observations, engine.Observation{}) }, "observations"},
		{"pods value without a pod", func(in *engine.Input) { in.Observations[1].Values[0].Pod = "" }, "observations[1].values[0].pod"},
		{"two values for an Object metric", func(in *engine.Input) {
			in.Spec.Metrics[1] = objectMetric("rps", engine.ValueTarget, 1)
			in.Observations[1] = values(1, 2)
		}, "observations[1].values"},
		{"unknown policy type", func(in *engine.Input) { in.Spec.Behavior.ScaleUp.Policies[1].Type = "Replicas" }, "spec.behavior.scaleUp.policies[1].type"},
		{"policy value 0", func(in *engine.Input) { in.Spec.Behavior.ScaleDown.Policies[0].Value = 0 }, "spec.behavior.scaleDown.policies[0].value"},
		{"policy period 0", func(in *engine.Input) { in.Spec.Behavior.ScaleUp.Policies[0].PeriodSeconds = 0 }, "spec.behavior.scaleUp.policies[0].periodSeconds"},
		{"policy period above 1800", func(in *engine.Input) { in.Spec.Behavior.ScaleUp.Policies[0].PeriodSeconds = 1801 }, "spec.behavior.scaleUp.policies[0].periodSeconds"},
		{"no policies", func(in *engine.Input) { in.Spec.Behavior.ScaleDown.Policies = nil }, "spec.behavior.scaleDown.policies"},
		{"unknown select policy", func(in *engine.Input) { in.Spec.Behavior.ScaleUp.SelectPolicy = "Average" }, "spec.behavior.scaleUp.selectPolicy"},
		{"unset select policy", func(in *engine.Input) { in.Spec.Behavior.ScaleDown.SelectPolicy = "" }, "spec.behavior.scaleDown.selectPolicy"},
		{"window above 3600", func(in *engine.Input) { in.Spec.Behavior.ScaleDown.StabilizationWindowSeconds = 3601 }, "spec.behavior.scaleDown.stabilizationWindowSeconds"},
		{"negative window", func(in *engine.Input) { in.Spec.Behavior.ScaleUp.StabilizationWindowSeconds = -1 }, "spec.behavior.scaleUp.stabilizationWindowSeconds"},
		{"negative desired replicas", func(in *engine.Input) { in.Status.DesiredReplicas = -1 }, "status.desiredReplicas"},
		{"condition without a type", func(in *engine.Input) {
			in.Status.Conditions = []engine.Condition{{Type: engine.AbleToScale}, {Status: engine.ConditionTrue}}
		}, "status.conditions[1].type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := validInput()
			tc.mutate(&in)
			err := engine.Validate(in)
			var fe *engine.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate = %v; want a *engine.FieldError", err)
			}
			if fe.Field != tc.wantField {
				t.Errorf("field = %q (%v); want %q", fe.Field, err, tc.wantField)
			}
			if !errors.Is(err, engine.ErrInvalidInput) {
				t.Errorf("errors.Is(%v, ErrInvalidInput) = false", err)
			}
			d, derr := engine.Decide(in, engine.History{})
			if derr == nil || derr.Error() != err.Error() {
				t.Errorf("Decide error = %v; want %v", derr, err)
			}
			if d.DesiredReplicas != 0 || d.Rescale || d.Status.Conditions != nil {
				t.Errorf("Decide returned a decision with its error: %+v", d)
			}
		})
	}
}

// TestValidateOrder: with several invalid entries in one resource list
// the first in the list's order is reported, every time.
func TestValidateOrder(t *testing.T) {
	in := validInput()
	in.Pods[0].Containers[0].Requests = engine.ResourceList{{Name: "z", Milli: -1}, {Name: "cpu", Milli: -1}, {Name: "a", Milli: -1}}
	in.ResourceMetrics.Pods[0].Containers[0].Usage = engine.ResourceList{{Name: "b", Milli: -1}}
	first := engine.Validate(in)
	for range 20 {
		if err := engine.Validate(in); err.Error() != first.Error() {
			t.Fatalf("Validate = %v, then %v", first, err)
		}
	}
	var fe *engine.FieldError
	if !errors.As(first, &fe) || fe.Field != "pods[0].containers[0].requests[z]" {
		t.Errorf("Validate = %v; want the list's first invalid entry, pods[0].containers[0].requests[z]", first)
	}
}

func TestFieldError(t *testing.T) {
	err := error(&engine.FieldError{Field: "spec.maxReplicas", Reason: "must be >= 1, got 0"})
	if want := "engine: invalid spec.maxReplicas: must be >= 1, got 0"; err.Error() != want {
		t.Errorf("Error() = %q; want %q", err.Error(), want)
	}
	if !errors.Is(err, engine.ErrInvalidInput) {
		t.Errorf("errors.Is(FieldError, ErrInvalidInput) = false")
	}
	if errors.Is(err, errors.New("engine: invalid input")) {
		t.Errorf("FieldError matches an unrelated error with the same text")
	}
}
