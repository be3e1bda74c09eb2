package differential

import (
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

// keda is an External metric as KEDA's ScaledObjects generate it: a metric
// named s<index>-<trigger>, selected by the ScaledObject's name, with an
// AverageValue target.
func keda(metric, perPod string) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: metric, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"scaledobject.keda.sh/name": "app"}}},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: quantity(perPod)}}}
}

func all(v string) func(int) string { return func(int) string { return v } }

// cases are the side-by-side cases; each runs in parallel with the others.
func cases() []differenceCase {
	return []differenceCase{{
		name: "cpu", replicas: 2,
		autoscalers: []autoscalingv2.HorizontalPodAutoscalerSpec{{ScaleTargetRef: ref("app"), MinReplicas: ptr.To[int32](1), MaxReplicas: 10,
			Metrics: []autoscalingv2.MetricSpec{cpuUtilization(50)}}},
		steps: []step{
			{what: "75% of request against 50%: up", load: load{cpu: all("75m")}},
			{what: "52%: within tolerance", load: load{cpu: all("52m")}},
			{what: "20%: down after the default window", load: load{cpu: all("20m")}},
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
			{what: "memory 50Mi/40Mi, cpu 30%/60%: memory wins", load: load{cpu: all("30m")}},
			{what: "cpu 150%/60%: cpu wins", load: load{cpu: all("150m")}},
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
		// Fewer than ten rescales: past ten Events of one reason within ten
		// minutes, the controller's recorder combines them
		// (docs/differences.md).
		name: "behavior", replicas: 2,
		autoscalers: []autoscalingv2.HorizontalPodAutoscalerSpec{{ScaleTargetRef: ref("app"), MinReplicas: ptr.To[int32](1), MaxReplicas: 10,
			Metrics: []autoscalingv2.MetricSpec{cpuUtilization(50)},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0), Policies: []autoscalingv2.HPAScalingPolicy{
					{Type: autoscalingv2.PodsScalingPolicy, Value: 2, PeriodSeconds: 3}, {Type: autoscalingv2.PercentScalingPolicy, Value: 50, PeriodSeconds: 3}}},
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](3), SelectPolicy: ptr.To(autoscalingv2.MinChangePolicySelect),
					Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 50, PeriodSeconds: 2}, {Type: autoscalingv2.PodsScalingPolicy, Value: 3, PeriodSeconds: 2}}},
			}}},
		steps: []step{
			{what: "400%: up by policy steps to the max", load: load{cpu: all("200m")}},
			{what: "5%: down by the smaller policy", load: load{cpu: all("5m")}},
		},
	}, {
		name: "unready-missing", replicas: 4,
		autoscalers: []autoscalingv2.HorizontalPodAutoscalerSpec{{ScaleTargetRef: ref("app"), MinReplicas: ptr.To[int32](1), MaxReplicas: 10,
			Metrics: []autoscalingv2.MetricSpec{cpuUtilization(50)}}},
		steps: []step{
			{what: "one pod unready and just started, one without metrics, two hot", load: load{
				cpu:   func(i int) string { return map[int]string{0: "90m", 1: "90m", 2: "", 3: "10m"}[i] },
				ready: func(i int) bool { return i != 3 },
				started: func(i int) time.Duration {
					return map[bool]time.Duration{true: 10 * time.Second, false: 10 * time.Minute}[i == 3]
				},
			}},
			{what: "cold with a pod missing: the missing one counts as at target", load: load{
				cpu: func(i int) string {
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
			{what: "cpu answers, the external metric fails", load: load{cpu: all("75m")}},
			{what: "cpu has no samples either", load: load{cpu: all("")}},
		},
	}, {
		name: "limits", replicas: 3,
		autoscalers: []autoscalingv2.HorizontalPodAutoscalerSpec{{ScaleTargetRef: ref("app"), MinReplicas: ptr.To[int32](2), MaxReplicas: 5,
			Metrics: []autoscalingv2.MetricSpec{cpuUtilization(50)}}},
		steps: []step{
			{what: "far above: max", load: load{cpu: all("500m")}},
			{what: "scaled by hand above max", load: load{cpu: all("50m")}, scale: 7},
			{what: "far below: min", load: load{cpu: all("1m")}},
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
			{what: "at target while both autoscalers register", load: load{cpu: all("50m")}},
			{what: "90%: neither scales", load: load{cpu: all("90m")}},
		},
	}}
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
