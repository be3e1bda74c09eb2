package hpa_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	custommetricsv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalmetricsv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/setpointhq/setpoint/hpa"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

var (
	now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	ref = autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}

	cpu60 = autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](60)}}}
	cpu80 = autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)}}}

	maxPolicy = autoscalingv2.MaxChangePolicySelect
	minPolicy = autoscalingv2.MinChangePolicySelect
	disabled  = autoscalingv2.DisabledPolicySelect

	defaultUp = &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: ptr.To[int32](0), SelectPolicy: &maxPolicy,
		Policies: []autoscalingv2.HPAScalingPolicy{{Type: "Pods", Value: 4, PeriodSeconds: 15}, {Type: "Percent", Value: 100, PeriodSeconds: 15}},
	}
	defaultDown = &autoscalingv2.HPAScalingRules{
		SelectPolicy: &maxPolicy,
		Policies:     []autoscalingv2.HPAScalingPolicy{{Type: "Percent", Value: 100, PeriodSeconds: 15}},
	}
)

// TestDefault: the API server's defaulting, field by field.
func TestDefault(t *testing.T) {
	tol := resource.MustParse("50m")
	for _, tc := range []struct {
		name string
		in   autoscalingv2.HorizontalPodAutoscalerSpec
		want autoscalingv2.HorizontalPodAutoscalerSpec
	}{
		{
			name: "empty metrics are 80% cpu, absent minReplicas is 1",
			in:   autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: ref, MaxReplicas: 5},
			want: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: ref, MinReplicas: ptr.To[int32](1), MaxReplicas: 5, Metrics: []autoscalingv2.MetricSpec{cpu80}},
		},
		{
			name: "metrics and minReplicas kept, minReplicas 0 too",
			in:   autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: ref, MinReplicas: ptr.To[int32](0), MaxReplicas: 5, Metrics: []autoscalingv2.MetricSpec{cpu60}},
			want: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: ref, MinReplicas: ptr.To[int32](0), MaxReplicas: 5, Metrics: []autoscalingv2.MetricSpec{cpu60}},
		},
		{
			name: "absent behavior stays absent (legacy behavior)",
			in:   autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](2), MaxReplicas: 5, Metrics: []autoscalingv2.MetricSpec{cpu60}},
			want: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](2), MaxReplicas: 5, Metrics: []autoscalingv2.MetricSpec{cpu60}},
		},
		{
			name: "empty behavior gets both directions' defaults",
			in:   autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](2), MaxReplicas: 5, Metrics: []autoscalingv2.MetricSpec{cpu60}, Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{}},
			want: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](2), MaxReplicas: 5, Metrics: []autoscalingv2.MetricSpec{cpu60},
				Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: defaultUp, ScaleDown: defaultDown}},
		},
		{
			name: "set fields of a direction kept, absent ones defaulted",
			in: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](2), MaxReplicas: 5, Metrics: []autoscalingv2.MetricSpec{cpu60},
				Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
					ScaleUp:   &autoscalingv2.HPAScalingRules{SelectPolicy: &disabled},
					ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](60), Tolerance: &tol},
				}},
			want: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](2), MaxReplicas: 5, Metrics: []autoscalingv2.MetricSpec{cpu60},
				Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
					ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0), SelectPolicy: &disabled, Policies: defaultUp.Policies},
					ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](60), SelectPolicy: &maxPolicy, Policies: defaultDown.Policies,
						Tolerance: &tol},
				}},
		},
		{
			name: "policies replace the defaults; an empty list is kept for validation to reject",
			in: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](1), MaxReplicas: 5, Metrics: []autoscalingv2.MetricSpec{cpu60},
				Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
					ScaleUp:   &autoscalingv2.HPAScalingRules{SelectPolicy: &minPolicy, Policies: []autoscalingv2.HPAScalingPolicy{{Type: "Pods", Value: 1, PeriodSeconds: 60}}},
					ScaleDown: &autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{}},
				}},
			want: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](1), MaxReplicas: 5, Metrics: []autoscalingv2.MetricSpec{cpu60},
				Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
					ScaleUp:   &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0), SelectPolicy: &minPolicy, Policies: []autoscalingv2.HPAScalingPolicy{{Type: "Pods", Value: 1, PeriodSeconds: 60}}},
					ScaleDown: &autoscalingv2.HPAScalingRules{SelectPolicy: &maxPolicy, Policies: []autoscalingv2.HPAScalingPolicy{}},
				}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.in.DeepCopy()
			got := hpa.Default(tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Default (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(*before, tc.in); diff != "" {
				t.Errorf("Default changed its argument (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(got, hpa.Default(got)); diff != "" {
				t.Errorf("Default is not idempotent (-once +twice):\n%s", diff)
			}
		})
	}
}

// TestRequest: what a reconcile reads becomes the request, metric by
// metric.
func TestRequest(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("500m")}}}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: now.Add(-time.Hour)}},
	}
	wantPod := &setpointv1.Pod{Name: "web-1", Phase: "Running", StartTime: timestamppb.New(now.Add(-time.Hour)),
		Containers: []*setpointv1.Container{{Name: "app", Requests: map[string]string{"cpu": "500m"}}}}
	podMetrics := []metricsv1beta1.PodMetrics{{ObjectMeta: metav1.ObjectMeta{Name: "web-1"}, Timestamp: metav1.NewTime(now), Window: metav1.Duration{Duration: 15 * time.Second},
		Containers: []metricsv1beta1.ContainerMetrics{{Name: "app", Usage: corev1.ResourceList{"cpu": resource.MustParse("450m")}}}}}
	wantPodMetrics := &setpointv1.ResourceMetrics{Items: []*setpointv1.PodMetrics{{Pod: "web-1", Timestamp: timestamppb.New(now), Window: durationpb.New(15 * time.Second),
		Containers: []*setpointv1.ContainerMetrics{{Name: "app", Usage: map[string]string{"cpu": "450m"}}}}}}
	pods := autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "rps", Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "verb", Operator: "In", Values: []string{"GET"}}}}},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("100"))}}}
	wantPods := &setpointv1.MetricSpec{Type: "Pods", Pods: &setpointv1.PodsMetricSource{
		Metric: &setpointv1.MetricIdentifier{Name: "rps", Selector: &setpointv1.LabelSelector{MatchExpressions: []*setpointv1.LabelSelectorRequirement{{Key: "verb", Operator: "In", Values: []string{"GET"}}}}},
		Target: &setpointv1.MetricTarget{Type: "AverageValue", AverageValue: "100"}}}
	object := autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
		DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Service", Name: "front"}, Metric: autoscalingv2.MetricIdentifier{Name: "hits"},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr.To(resource.MustParse("2k"))}}}
	wantObject := &setpointv1.MetricSpec{Type: "Object", Object: &setpointv1.ObjectMetricSource{
		DescribedObject: &setpointv1.CrossVersionObjectReference{ApiVersion: "v1", Kind: "Service", Name: "front"}, Metric: &setpointv1.MetricIdentifier{Name: "hits"},
		Target: &setpointv1.MetricTarget{Type: "Value", Value: "2k"}}}
	// Both value and averageValue, as a user may write them: sent as
	// written, the service resolves (averageValue wins for External).
	external := autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "queue"},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr.To(resource.MustParse("30")), AverageValue: ptr.To(resource.MustParse("5"))}}}
	wantExternal := &setpointv1.MetricSpec{Type: "External", External: &setpointv1.ExternalMetricSource{
		Metric: &setpointv1.MetricIdentifier{Name: "queue"}, Target: &setpointv1.MetricTarget{Type: "Value", Value: "30", AverageValue: "5"}}}
	container := autoscalingv2.MetricSpec{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricSource{
		Name: corev1.ResourceMemory, Container: "app", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("256Mi"))}}}
	wantContainer := &setpointv1.MetricSpec{Type: "ContainerResource", ContainerResource: &setpointv1.ContainerResourceMetricSource{
		Name: "memory", Container: "app", Target: &setpointv1.MetricTarget{Type: "AverageValue", AverageValue: "256Mi"}}}
	wantCPU80 := &setpointv1.MetricSpec{Type: "Resource", Resource: &setpointv1.ResourceMetricSource{Name: "cpu", Target: &setpointv1.MetricTarget{Type: "Utilization", AverageUtilization: ptr.To[int32](80)}}}
	key := &setpointv1.TargetKey{Cluster: "c", Namespace: "ns", Name: "web"}
	wantRef := &setpointv1.CrossVersionObjectReference{ApiVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	window := int64(30)

	for _, tc := range []struct {
		name string
		in   hpa.Reading
		want *setpointv1.RecommendRequest
	}{
		{
			name: "no metrics: 80% cpu, minReplicas 1; the resource fetch error is the metric's",
			in: hpa.Reading{Target: key, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: ref, MaxReplicas: 4},
				Scale: hpa.Scale{Replicas: 1, StatusReplicas: 1, Selector: "app=web"}, Pods: []*corev1.Pod{pod},
				ResourceMetrics: hpa.ResourceMetrics{Fetched: true, Err: errors.New("metrics down")}},
			want: &setpointv1.RecommendRequest{Target: key,
				Spec:     &setpointv1.HorizontalPodAutoscalerSpec{ScaleTargetRef: wantRef, MinReplicas: ptr.To[int32](1), MaxReplicas: 4, Metrics: []*setpointv1.MetricSpec{wantCPU80}},
				Settings: &setpointv1.ControllerSettings{}, Scale: &setpointv1.Scale{Replicas: 1, StatusReplicas: 1, Selector: "app=web"}, Pods: []*setpointv1.Pod{wantPod},
				ResourceMetrics: &setpointv1.ResourceMetrics{Error: "metrics down"}, Observations: []*setpointv1.MetricObservation{{Error: "metrics down"}}},
		},
		{
			name: "every kind of metric, with settings",
			in: hpa.Reading{Target: key,
				Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: ref, MinReplicas: ptr.To[int32](2), MaxReplicas: 9,
					Metrics: []autoscalingv2.MetricSpec{container, pods, object, external}},
				Settings:        hpa.Settings{Tolerance: ptr.To(0.05), CPUInitializationPeriod: ptr.To(time.Minute), InitialReadinessDelay: ptr.To(time.Duration(0)), DownscaleStabilizationWindow: ptr.To(2 * time.Minute)},
				Scale:           hpa.Scale{Replicas: 2, StatusReplicas: 2, Selector: "app=web"},
				ResourceMetrics: hpa.ResourceMetrics{Fetched: true, Items: podMetrics},
				Metrics: []hpa.MetricValues{
					{},
					{Custom: []custommetricsv1beta2.MetricValue{
						{DescribedObject: corev1.ObjectReference{Kind: "Pod", Name: "web-1"}, Timestamp: metav1.NewTime(now), WindowSeconds: &window, Value: resource.MustParse("120")},
						{DescribedObject: corev1.ObjectReference{Kind: "Pod", Name: "web-2"}, Timestamp: metav1.NewTime(now), Value: resource.MustParse("80500m")},
					}},
					{Custom: []custommetricsv1beta2.MetricValue{{DescribedObject: corev1.ObjectReference{Kind: "Service", Name: "front"}, Timestamp: metav1.NewTime(now), Value: resource.MustParse("3k")}}},
					{External: []externalmetricsv1beta1.ExternalMetricValue{{MetricName: "queue", Timestamp: metav1.NewTime(now), Value: resource.MustParse("12")}, {MetricName: "queue", Timestamp: metav1.NewTime(now), Value: resource.MustParse("7")}}},
				}},
			want: &setpointv1.RecommendRequest{Target: key,
				Spec: &setpointv1.HorizontalPodAutoscalerSpec{ScaleTargetRef: wantRef, MinReplicas: ptr.To[int32](2), MaxReplicas: 9,
					Metrics: []*setpointv1.MetricSpec{wantContainer, wantPods, wantObject, wantExternal}},
				Settings: &setpointv1.ControllerSettings{Tolerance: ptr.To(0.05), CpuInitializationPeriod: durationpb.New(time.Minute),
					InitialReadinessDelay: durationpb.New(0), DownscaleStabilizationWindow: durationpb.New(2 * time.Minute)},
				Scale: &setpointv1.Scale{Replicas: 2, StatusReplicas: 2, Selector: "app=web"}, ResourceMetrics: wantPodMetrics,
				Observations: []*setpointv1.MetricObservation{
					{},
					{Values: []*setpointv1.MetricValue{
						{Pod: "web-1", Value: "120", Timestamp: timestamppb.New(now), Window: durationpb.New(30 * time.Second)},
						{Pod: "web-2", Value: "80500m", Timestamp: timestamppb.New(now)},
					}},
					{Values: []*setpointv1.MetricValue{{Value: "3k", Timestamp: timestamppb.New(now)}}},
					{Values: []*setpointv1.MetricValue{{Value: "12", Timestamp: timestamppb.New(now)}, {Value: "7", Timestamp: timestamppb.New(now)}}},
				}},
		},
		{
			name: "fetch errors stay with their metric; missing entries are empty; resource metrics not fetched",
			in: hpa.Reading{Target: key,
				Spec:    autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: ref, MinReplicas: ptr.To[int32](0), MaxReplicas: 3, Metrics: []autoscalingv2.MetricSpec{object, external}},
				Scale:   hpa.Scale{},
				Metrics: []hpa.MetricValues{{Err: errors.New(`hits "front" not found`)}}},
			want: &setpointv1.RecommendRequest{Target: key,
				Spec:     &setpointv1.HorizontalPodAutoscalerSpec{ScaleTargetRef: wantRef, MinReplicas: ptr.To[int32](0), MaxReplicas: 3, Metrics: []*setpointv1.MetricSpec{wantObject, wantExternal}},
				Settings: &setpointv1.ControllerSettings{}, Scale: &setpointv1.Scale{},
				Observations: []*setpointv1.MetricObservation{{Error: `hits "front" not found`}, {}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := hpa.Request(&tc.in)
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("Request (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPod: sidecars, init containers, pod-level requests, overhead,
// readiness and deletion.
func TestPod(t *testing.T) {
	start, ready := metav1.NewTime(now.Add(-time.Hour)), metav1.NewTime(now.Add(-50*time.Minute))
	for _, tc := range []struct {
		name string
		in   *corev1.Pod
		want *setpointv1.Pod
	}{
		{
			name: "pending, no start time, no containers",
			in:   &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Phase: corev1.PodPending}},
			want: &setpointv1.Pod{Name: "p", Phase: "Pending"},
		},
		{
			name: "everything the HPA reads",
			in: &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "p", DeletionTimestamp: &start},
				Spec: corev1.PodSpec{
					InitContainers: []corev1.Container{
						{Name: "setup", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("1")}}},
						{Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("50m")}}},
					},
					Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("250m")}}}},
					Resources:  &corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("500m"), "memory": resource.MustParse("1Gi")}},
					Overhead:   corev1.ResourceList{"cpu": resource.MustParse("10m")},
				},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &start, Conditions: []corev1.PodCondition{
					{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
					{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: ready},
				}},
			},
			want: &setpointv1.Pod{
				Name: "p", Phase: "Running", Deleting: true, StartTime: timestamppb.New(start.Time),
				Ready: &setpointv1.PodReadyCondition{Status: "False", LastTransitionTime: timestamppb.New(ready.Time)},
				Containers: []*setpointv1.Container{
					{Name: "app", Requests: map[string]string{"cpu": "250m"}},
					{Name: "setup", Requests: map[string]string{"cpu": "1"}, Init: true},
					{Name: "proxy", Requests: map[string]string{"cpu": "50m"}, RestartableInit: true},
				},
				Requests: map[string]string{"cpu": "500m", "memory": "1Gi"},
				Overhead: map[string]string{"cpu": "10m"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, hpa.Pod(tc.in), protocmp.Transform()); diff != "" {
				t.Errorf("Pod (-want +got):\n%s", diff)
			}
		})
	}
}
