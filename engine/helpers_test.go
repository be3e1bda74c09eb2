package engine_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/setpointhq/setpoint/engine"
)

// now is the instant of every single-decision test; scenarios step forward
// from it.
var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// settings are the controller defaults the server resolves: tolerance 0.1,
// cpu initialization period 5m, initial readiness delay 30s, downscale
// window 5m.
func settings() engine.Settings {
	return engine.Settings{
		Tolerance:                    0.1,
		CPUInitializationPeriod:      5 * time.Minute,
		InitialReadinessDelay:        30 * time.Second,
		DownscaleStabilizationWindow: 5 * time.Minute,
	}
}

// input returns a valid input at now: current replicas (spec and status),
// min 1, max 100, the given metrics with one empty observation each, a
// parsable selector and no behavior.
func input(current int32, metrics ...engine.MetricSpec) engine.Input {
	return engine.Input{
		Now:          now,
		Spec:         engine.Spec{MinReplicas: 1, MaxReplicas: 100, Metrics: metrics},
		Settings:     settings(),
		Scale:        engine.Scale{Replicas: current, StatusReplicas: current, Selector: "app=web"},
		Observations: make([]engine.Observation, len(metrics)),
	}
}

// Metric specs.

func cpuUtilization(target int32) engine.MetricSpec {
	return resourceUtilization("cpu", target)
}

func resourceUtilization(resource string, target int32) engine.MetricSpec {
	return engine.MetricSpec{Type: engine.ResourceSource, Resource: resource,
		Target: engine.Target{Type: engine.UtilizationTarget, Utilization: target}}
}

func containerUtilization(resource, container string, target int32) engine.MetricSpec {
	return engine.MetricSpec{Type: engine.ContainerResourceSource, Resource: resource, Container: container,
		Target: engine.Target{Type: engine.UtilizationTarget, Utilization: target}}
}

func resourceAverage(resource string, milli int64) engine.MetricSpec {
	return engine.MetricSpec{Type: engine.ResourceSource, Resource: resource,
		Target: engine.Target{Type: engine.AverageValueTarget, Milli: milli}}
}

func podsMetric(name string, milli int64) engine.MetricSpec {
	return engine.MetricSpec{Type: engine.PodsSource, Metric: engine.MetricIdentifier{Name: name},
		Target: engine.Target{Type: engine.AverageValueTarget, Milli: milli}}
}

func objectMetric(name string, tt engine.TargetType, milli int64) engine.MetricSpec {
	return engine.MetricSpec{Type: engine.ObjectSource, Metric: engine.MetricIdentifier{Name: name},
		DescribedObject: engine.ObjectReference{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: "main"},
		Target:          engine.Target{Type: tt, Milli: milli}}
}

func externalMetric(name string, tt engine.TargetType, milli int64) engine.MetricSpec {
	return engine.MetricSpec{Type: engine.ExternalSource, Metric: engine.MetricIdentifier{Name: name},
		Target: engine.Target{Type: tt, Milli: milli}}
}

// values is an observation of plain values (Object, External).
func values(milli ...int64) engine.Observation {
	o := engine.Observation{Values: []engine.MetricValue{}}
	for _, m := range milli {
		o.Values = append(o.Values, engine.MetricValue{Milli: m, Timestamp: now.Add(-10 * time.Second)})
	}
	return o
}

// podValues is an observation of a Pods metric: name, value pairs.
func podValues(kv ...any) engine.Observation {
	o := engine.Observation{Values: []engine.MetricValue{}}
	for i := 0; i < len(kv); i += 2 {
		o.Values = append(o.Values, engine.MetricValue{Pod: kv[i].(string), Milli: int64(kv[i+1].(int)),
			Timestamp: now.Add(-10 * time.Second), Window: time.Minute})
	}
	return o
}

// Pods.

// podOpt adjusts a pod built by pod.
type podOpt func(*engine.Pod)

// pod returns a running pod started 10 minutes ago, Ready since 9 minutes
// ago, with one container "app" requesting requests (milli-units).
func pod(name string, requests map[string]int64, opts ...podOpt) engine.Pod {
	p := engine.Pod{
		Name:       name,
		Phase:      engine.PodRunning,
		StartTime:  now.Add(-10 * time.Minute),
		Ready:      &engine.PodReadiness{Status: engine.ConditionTrue, LastTransitionTime: now.Add(-9 * time.Minute)},
		Containers: []engine.Container{{Name: "app", Requests: engine.ResourceListOf(requests)}},
	}
	for _, o := range opts {
		o(&p)
	}
	return p
}

// cpuPod is a pod requesting cpu millicores.
func cpuPod(name string, cpu int64, opts ...podOpt) engine.Pod {
	return pod(name, map[string]int64{"cpu": cpu}, opts...)
}

func phase(ph engine.PodPhase) podOpt { return func(p *engine.Pod) { p.Phase = ph } }

func deleting() podOpt { return func(p *engine.Pod) { p.Deleting = true } }

func startedAgo(d time.Duration) podOpt { return func(p *engine.Pod) { p.StartTime = now.Add(-d) } }

func noStartTime() podOpt { return func(p *engine.Pod) { p.StartTime = time.Time{} } }

func noReadyCondition() podOpt { return func(p *engine.Pod) { p.Ready = nil } }

// ready sets the Ready condition's status and when it last changed.
func ready(s engine.ConditionStatus, transitionAgo time.Duration) podOpt {
	return func(p *engine.Pod) {
		p.Ready = &engine.PodReadiness{Status: s, LastTransitionTime: now.Add(-transitionAgo)}
	}
}

func containers(cs ...engine.Container) podOpt {
	return func(p *engine.Pod) { p.Containers = cs }
}

func podRequests(r map[string]int64) podOpt {
	return func(p *engine.Pod) { p.Requests = engine.ResourceListOf(r) }
}

// Resource metrics.

// usageOpt adjusts a PodUsage built by usage.
type usageOpt func(*engine.PodUsage)

// usage is a resource metrics sample of pod's container "app", taken 10s
// ago over a 30s window.
func usage(podName string, u map[string]int64, opts ...usageOpt) engine.PodUsage {
	pu := engine.PodUsage{Pod: podName, Timestamp: now.Add(-10 * time.Second), Window: 30 * time.Second,
		Containers: []engine.ContainerUsage{{Name: "app", Usage: engine.ResourceListOf(u)}}}
	for _, o := range opts {
		o(&pu)
	}
	return pu
}

func cpuUsage(podName string, cpu int64, opts ...usageOpt) engine.PodUsage {
	return usage(podName, map[string]int64{"cpu": cpu}, opts...)
}

func sampledAgo(d time.Duration) usageOpt {
	return func(u *engine.PodUsage) { u.Timestamp = now.Add(-d) }
}

func usageContainers(cs ...engine.ContainerUsage) usageOpt {
	return func(u *engine.PodUsage) { u.Containers = cs }
}

// Behavior.

// behavior returns a behavior with the API server's defaults: scale-up no
// window, Pods 4/15s and Percent 100/15s, Max; scale-down a 300s window,
// Percent 100/15s, Max; tolerance 0.1 both ways.
func behavior() *engine.Behavior {
	return &engine.Behavior{
		ScaleUp: engine.Rules{SelectPolicy: engine.SelectMax, Tolerance: 0.1, Policies: []engine.Policy{
			{Type: engine.PodsPolicy, Value: 4, PeriodSeconds: 15},
			{Type: engine.PercentPolicy, Value: 100, PeriodSeconds: 15},
		}},
		ScaleDown: engine.Rules{StabilizationWindowSeconds: 300, SelectPolicy: engine.SelectMax, Tolerance: 0.1, Policies: []engine.Policy{
			{Type: engine.PercentPolicy, Value: 100, PeriodSeconds: 15},
		}},
	}
}

// decide calls engine.Decide and fails the test on an error.
func decide(t *testing.T, in engine.Input, h engine.History) engine.Decision {
	t.Helper()
	d, err := engine.Decide(in, h)
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return d
}

// condition returns the condition of type ct in s, or nil.
func condition(s engine.Status, ct engine.ConditionType) *engine.Condition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == ct {
			return &s.Conditions[i]
		}
	}
	return nil
}

// cond is a condition without message or transition time, for comparing
// only what is normative: type, status and reason.
type cond struct {
	Type   engine.ConditionType
	Status engine.ConditionStatus
	Reason string
}

// conds reduces a status' conditions to cond, in order.
func conds(s engine.Status) []cond {
	var out []cond
	for _, c := range s.Conditions {
		out = append(out, cond{c.Type, c.Status, c.Reason})
	}
	return out
}

// ignoreMessages leaves human-readable messages out of comparisons.
var ignoreMessages = cmp.Options{
	cmpopts.IgnoreFields(engine.Step{}, "Message"),
	cmpopts.IgnoreFields(engine.Condition{}, "Message"),
}
