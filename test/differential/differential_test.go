package differential

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/setpointhq/setpoint/internal/kubetest/metricsserver"
)

func ref(name string) autoscalingv2.CrossVersionObjectReference {
	return autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name}
}

func cpuUtilization(pct int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(pct)}}}
}

func quantity(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

// onCPU is the spec of one autoscaler of "app" at 50% CPU utilization,
// from 1 to max replicas, with behavior b.
func onCPU(max int32, b *autoscalingv2.HorizontalPodAutoscalerBehavior) []autoscalingv2.HorizontalPodAutoscalerSpec {
	return []autoscalingv2.HorizontalPodAutoscalerSpec{{ScaleTargetRef: ref("app"), MinReplicas: ptr.To[int32](1), MaxReplicas: max,
		Metrics: []autoscalingv2.MetricSpec{cpuUtilization(50)}, Behavior: b}}
}

// withCPU is the spec of an autoscaler of target at 50% CPU utilization
// and another metric, from 1 to 10 replicas.
func withCPU(target string, other autoscalingv2.MetricSpec) autoscalingv2.HorizontalPodAutoscalerSpec {
	return autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: ref(target), MinReplicas: ptr.To[int32](1), MaxReplicas: 10,
		Metrics: []autoscalingv2.MetricSpec{cpuUtilization(50), other}}
}

// pods is a scaling policy of n pods per period of seconds.
func pods(n, seconds int32) autoscalingv2.HPAScalingPolicy {
	return autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PodsScalingPolicy, Value: n, PeriodSeconds: seconds}
}

// percent is a scaling policy of pct percent per period of seconds.
func percent(pct, seconds int32) autoscalingv2.HPAScalingPolicy {
	return autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PercentScalingPolicy, Value: pct, PeriodSeconds: seconds}
}

// keda is an External metric as KEDA's ScaledObjects generate it: a metric
// named s<index>-<trigger>, selected by the ScaledObject's name, with an
// AverageValue target.
func keda(metric, perPod string) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: metric, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"scaledobject.keda.sh/name": "app"}}},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: quantity(perPod)}}}
}

// all is the same value for every pod.
func all(v string) func(int) string { return func(int) string { return v } }

// each is the same CPU usage for every pod, however many there are.
func each(v string) func(int, int) string { return func(int, int) string { return v } }

// spread is a total CPU usage of milli millicores shared evenly by the
// pods, however many there are (rounded down per pod).
func spread(milli int) func(int, int) string {
	return func(_, n int) string { return fmt.Sprintf("%dm", milli/n) }
}

// hasEvents fails naming the words that no Event line of o contains.
func hasEvents(o observed, words ...string) error {
	var missing []string
	for _, w := range words {
		if !slices.ContainsFunc(o.Events, func(e string) bool { return strings.Contains(e, w) }) {
			missing = append(missing, w)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no Event with %q among %q", missing, o.Events)
	}
	return nil
}

// cases are the side-by-side cases; each runs in parallel with the others.
func cases() []differenceCase {
	cs := []differenceCase{{
		name: "cpu", replicas: 2,
		autoscalers: onCPU(10, nil),
		steps: []step{
			{what: "55%: past the 10% tolerance only in float64 (|1-1.1| > 0.1)", load: load{cpu: spread(110)}},
			{what: "75% of request against 50%: up", load: load{cpu: each("75m")}},
			{what: "52%: within tolerance", load: load{cpu: each("52m")}},
			{what: "20%: down after the default window", load: load{cpu: each("20m")}},
		},
	}, {
		name: "memory-container", replicas: 2,
		autoscalers: []autoscalingv2.HorizontalPodAutoscalerSpec{{ScaleTargetRef: ref("app"), MinReplicas: ptr.To[int32](1), MaxReplicas: 10,
			Metrics: []autoscalingv2.MetricSpec{
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceMemory,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: quantity("40Mi")}}},
				{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricSource{Name: corev1.ResourceCPU, Container: "app",
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](60)}}},
			}}},
		steps: []step{
			{what: "memory 50Mi/40Mi, cpu 30%/60%: memory wins", load: load{cpu: each("30m")}},
			{what: "cpu 150%/60%: cpu wins", load: load{cpu: each("150m")}},
		},
	}, {
		name: "pods-object", replicas: 2,
		autoscalers: []autoscalingv2.HorizontalPodAutoscalerSpec{{ScaleTargetRef: ref("app"), MinReplicas: ptr.To[int32](1), MaxReplicas: 10,
			Metrics: []autoscalingv2.MetricSpec{
				{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "requests"},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: quantity("10")}}},
				{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Service", Name: "app"},
					Metric: autoscalingv2.MetricIdentifier{Name: "hits"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: quantity("100")}}},
			}}},
		steps: []step{
			{what: "pods 15/10 per pod, object 100/100", load: load{podsMetric: all("15"), object: "100"}},
			{what: "object 300/100 wins", load: load{podsMetric: all("5"), object: "300"}},
			{what: "object metric gone: the pods metric alone", load: load{podsMetric: all("5")}},
		},
	}, {
		name: "keda", replicas: 1,
		autoscalers: []autoscalingv2.HorizontalPodAutoscalerSpec{{ScaleTargetRef: ref("app"), MinReplicas: ptr.To[int32](1), MaxReplicas: 8,
			Metrics: []autoscalingv2.MetricSpec{keda("queue", "5")}}},
		steps: []step{
			{what: "queue 23, 5 per pod", load: load{external: "23"}},
			{what: "queue 100: max", load: load{external: "100"}},
			{what: "no series", load: load{}},
		},
	}, {
		name: "behavior", replicas: 2,
		autoscalers: onCPU(10, &autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0), Policies: []autoscalingv2.HPAScalingPolicy{
				pods(2, 3), percent(50, 3)}},
			ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](3), SelectPolicy: ptr.To(autoscalingv2.MinChangePolicySelect),
				Policies: []autoscalingv2.HPAScalingPolicy{percent(50, 2), pods(3, 2)}},
		}),
		steps: []step{
			{what: "400%: up by policy steps to the max", load: load{cpu: each("200m")}},
			{what: "5%: down by the smaller policy", load: load{cpu: each("5m")}},
		},
	}, {
		name: "stabilization", replicas: 4,
		autoscalers: onCPU(10, &autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleUp:   &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](6)},
			ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](8)},
		}),
		steps: []step{
			{what: "at target", load: load{cpu: spread(200)}},
			{what: "300% for 3 s, inside the 6 s scale-up window", load: load{cpu: each("150m")}, lasts: 3 * time.Second},
			{what: "back at target: no scale-up happened", load: load{cpu: spread(200)}},
			{what: "20% for 3 s, inside the 8 s scale-down window", load: load{cpu: each("10m")}, lasts: 3 * time.Second},
			{what: "back at target: no scale-down happened", load: load{cpu: spread(200)}},
			{what: "300%: up once the window has passed, by the default policy (100% in 15 s)", load: load{cpu: each("150m")}},
			{what: "300% on", load: load{cpu: each("150m")}, lasts: 10 * time.Second},
			{what: "300%: max once the policy's period has passed", load: load{cpu: each("150m")}},
		},
	}, {
		name: "scale-down-policy", replicas: 8,
		autoscalers: onCPU(10, &autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleUp: &autoscalingv2.HPAScalingRules{SelectPolicy: ptr.To(autoscalingv2.DisabledPolicySelect)},
			ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0),
				Policies: []autoscalingv2.HPAScalingPolicy{pods(2, 3), percent(10, 3)}},
		}),
		steps: []step{
			{what: "5%: down by the larger policy, 2 pods per 3 s, to min", load: load{cpu: each("5m")}},
			{what: "400%: scale-up disabled", load: load{cpu: each("200m")}, held: true},
		},
	}, {
		name: "tolerance", replicas: 4,
		autoscalers: onCPU(10, &autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleUp:   &autoscalingv2.HPAScalingRules{Tolerance: quantity("0.2")},
			ScaleDown: &autoscalingv2.HPAScalingRules{Tolerance: quantity("300m")},
		}),
		steps: []step{
			{what: "58%: within a 20% scale-up tolerance", load: load{cpu: spread(232)}},
			{what: "36%: within a 30% scale-down tolerance", load: load{cpu: spread(144)}},
			{what: "30%: past it", load: load{cpu: spread(120)}},
			{what: "65%: past the scale-up tolerance", load: load{cpu: spread(195)}},
		},
	}, {
		name: "value-targets", replicas: 2,
		autoscalers: []autoscalingv2.HorizontalPodAutoscalerSpec{{ScaleTargetRef: ref("app"), MinReplicas: ptr.To[int32](1), MaxReplicas: 10,
			Metrics: []autoscalingv2.MetricSpec{
				{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Service", Name: "app"},
					Metric: autoscalingv2.MetricIdentifier{Name: "hits"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: quantity("20")}}},
				{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: "queue", Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
						{Key: "scaledobject.keda.sh/name", Operator: metav1.LabelSelectorOpIn, Values: []string{"app", "other"}}}}},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: quantity("100")}}},
			}}},
		steps: []step{
			{what: "object 120 at 20 per pod, external 100 against 100 in all: the object wins", load: load{object: "120", external: "100"}},
			{what: "object gone, external 50: no scale-down while a metric fails", load: load{external: "50"}},
			{what: "object back at 40: down by the external metric's half, twice, to the object's 2", load: load{object: "40", external: "50"}},
		},
	}, {
		// Past ten Events of one reason about one object within ten
		// minutes, the controller's recorder combines them into one
		// "(combined from similar events): ..." Event; the agent records
		// through the same recorder.
		name: "many-rescales", replicas: 2,
		autoscalers: onCPU(13, &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0),
			Policies: []autoscalingv2.HPAScalingPolicy{pods(1, 1)}}}),
		steps: []step{
			{what: "400%: up one pod a second, eleven rescales", load: load{cpu: each("200m")}},
		},
		expect: func(o observed) error { return hasEvents(o, "(combined from similar events)") },
	}, {
		name: "unready-missing", replicas: 4,
		autoscalers: onCPU(10, nil),
		steps: []step{
			{what: "one pod unready and just started, one without metrics, two hot", load: load{
				cpu:   func(i, _ int) string { return map[int]string{0: "90m", 1: "90m", 2: "", 3: "10m"}[i] },
				ready: func(i int) bool { return i != 3 },
				started: func(i int) time.Duration {
					return map[bool]time.Duration{true: 10 * time.Second, false: 10 * time.Minute}[i == 3]
				},
			}},
			{what: "cold with a pod missing: the missing one counts as at target", load: load{
				cpu: func(i, _ int) string {
					if i == 2 {
						return ""
					}
					return "10m"
				},
				ready: func(int) bool { return true }, started: func(int) time.Duration { return 10 * time.Minute },
			}},
		},
	}, {
		name: "failing", replicas: 2,
		autoscalers: []autoscalingv2.HorizontalPodAutoscalerSpec{{ScaleTargetRef: ref("app"), MinReplicas: ptr.To[int32](1), MaxReplicas: 10,
			Metrics: []autoscalingv2.MetricSpec{cpuUtilization(50), keda("failing-queue", "5")}}},
		steps: []step{
			{what: "cpu answers, the external metric fails", load: load{cpu: each("75m")}},
			{what: "cpu has no samples either", load: load{cpu: each("")}},
		},
	}, {
		// The messages of metrics that fail each in their own way, as
		// kubectl describe shows them: three targets, each with an
		// autoscaler on cpu and one failing metric. One failing metric per
		// autoscaler keeps each within the recorders' spam filter (25
		// Events per object, then one per 5 minutes), which would
		// otherwise drop a new message on one side and not the other.
		name: "errors", replicas: 2,
		targets: []target{{name: "app", labels: map[string]string{"app": "errors"}}, {name: "pods", labels: map[string]string{"app": "errors-pods"}},
			{name: "external", labels: map[string]string{"app": "errors-external"}}},
		autoscalers: []autoscalingv2.HorizontalPodAutoscalerSpec{
			withCPU("app", autoscalingv2.MetricSpec{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricSource{
				Name: corev1.ResourceCPU, Container: "sidecar", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}),
			withCPU("pods", autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "absent", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"verb": "GET"}}},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: quantity("10")}}}),
			withCPU("external", autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "absent-queue", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "jobs"},
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "region", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"b", "a"}}}}},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: quantity("100")}}}),
		},
		steps: []step{
			{what: "cpu 10%, the other metric failing: no scale-down", load: load{cpu: each("10m")}},
		},
		expect: func(o observed) error {
			return hasEvents(o, "FailedGetContainerResourceMetric", "FailedComputeMetricsReplicas")
		},
	}, {
		// Per-pod values whose sum in milli-units passes the int64 range:
		// the controller's sum wraps, and so must Setpoint's. The wrapped
		// average makes the count swing with the number of pods, so min
		// and max hold it at 2: the current metric and the conditions show
		// the wrap.
		name: "overflow", replicas: 2,
		autoscalers: []autoscalingv2.HorizontalPodAutoscalerSpec{{ScaleTargetRef: ref("app"), MinReplicas: ptr.To[int32](2), MaxReplicas: 2,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "requests"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: quantity("1P")}}}}}},
		steps: []step{
			{what: "two pods at 9P each: 1.8e19 milli-units in all, a negative average once wrapped", load: load{podsMetric: all("9P")}},
		},
		expect: func(o observed) error {
			if len(o.CurrentMetrics) != 1 || o.CurrentMetrics[0].Pods == nil || o.CurrentMetrics[0].Pods.Current.AverageValue == nil ||
				o.CurrentMetrics[0].Pods.Current.AverageValue.Sign() >= 0 {
				return fmt.Errorf("current metrics %+v: want one Pods metric with a negative (wrapped) average", o.CurrentMetrics)
			}
			return nil
		},
	}, {
		// Issue 27: per-pod values of 19 digits in milli-units, whose sum
		// wraps once; the wrapped average, negative and of 19 digits, is
		// the current metric. min = max = 4 hold the count still.
		name: "overflow-19-digit", replicas: 4,
		autoscalers: []autoscalingv2.HorizontalPodAutoscalerSpec{{ScaleTargetRef: ref("app"), MinReplicas: ptr.To[int32](4), MaxReplicas: 4,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "requests"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: quantity("4200T")}}}}}},
		steps: []step{
			{what: "four pods at 2.8e18 to 4.3e18 milli-units: the sum wraps to -4.25e18, the average is -1063726787889721773m", load: load{podsMetric: func(i int) string {
				return []string{"2786032325003348895m", "3406138300591494486m", "4252064379289823528m", "3747601917265997613m"}[i%4]
			}}},
		},
		expect: func(o observed) error {
			want := resource.MustParse("-1063726787889721773m")
			if len(o.CurrentMetrics) != 1 || o.CurrentMetrics[0].Pods == nil || o.CurrentMetrics[0].Pods.Current.AverageValue == nil ||
				o.CurrentMetrics[0].Pods.Current.AverageValue.Cmp(want) != 0 {
				return fmt.Errorf("current metrics %+v: want one Pods metric averaging %s (the sum wrapped once, over 4)", o.CurrentMetrics, want.String())
			}
			return nil
		},
	}, {
		name: "limits", replicas: 3,
		autoscalers: []autoscalingv2.HorizontalPodAutoscalerSpec{{ScaleTargetRef: ref("app"), MinReplicas: ptr.To[int32](2), MaxReplicas: 5,
			Metrics: []autoscalingv2.MetricSpec{cpuUtilization(50)}}},
		steps: []step{
			{what: "far above: max", load: load{cpu: each("500m")}},
			{what: "scaled by hand above max", load: load{cpu: each("50m")}, scale: 7},
			{what: "far below: min", load: load{cpu: each("1m")}},
		},
	}, {
		name: "ambiguous", replicas: 2,
		targets: []target{{name: "app", labels: map[string]string{"app": "shared"}}, {name: "other", labels: map[string]string{"app": "shared"}}},
		autoscalers: []autoscalingv2.HorizontalPodAutoscalerSpec{
			{ScaleTargetRef: ref("app"), MinReplicas: ptr.To[int32](1), MaxReplicas: 10, Metrics: []autoscalingv2.MetricSpec{cpuUtilization(50)}},
			{ScaleTargetRef: ref("other"), MinReplicas: ptr.To[int32](1), MaxReplicas: 10, Metrics: []autoscalingv2.MetricSpec{cpuUtilization(50)}},
		},
		// The load is at target until both autoscalers have been seen:
		// before that, the first one synced scales alone, on either side,
		// by timing.
		steps: []step{
			{what: "at target while both autoscalers register", load: load{cpu: each("50m")}},
			{what: "90%: neither scales", load: load{cpu: each("90m")}},
		},
	}}
	// In native mode an HPA and an Autoscaler selecting the same pods see
	// each other, as two HPAs do.
	mixed := cs[len(cs)-1]
	mixed.name, mixed.sides, mixed.mixed = "ambiguous-mixed", []side{kube, native}, true
	return append(cs, mixed)
}

// TestDifferential runs every case side by side with kube-controller-manager.
func TestDifferential(t *testing.T) {
	addr := startServer(t)
	env.metrics.SetUnavailable(metricsserver.ExternalMetrics, "failing-queue", true)
	t.Run("cases", func(t *testing.T) {
		for _, c := range cases() {
			t.Run(c.name, func(t *testing.T) { c.run(t, addr) })
		}
	})
}
