package agent

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

	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

func TestRecommendRequest(t *testing.T) {
	start := metav1.NewTime(now.Add(-time.Hour))
	ready := metav1.NewTime(now.Add(-50 * time.Minute))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", DeletionTimestamp: &start},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{
				{Name: "setup", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("1")}}},
				{Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("50m")}}},
			},
			Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("250m"), "memory": resource.MustParse("128Mi")}}}},
			Resources:  &corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("500m")}},
			Overhead:   corev1.ResourceList{"cpu": resource.MustParse("10m")},
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			StartTime:  &start,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: ready}},
		},
	}
	spec := v1alpha1.AutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		MaxReplicas:    5,
		Metrics: []autoscalingv2.MetricSpec{
			{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: "cpu", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](60)}}},
			{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "rps", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"verb": "GET"}}},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("100m"))}}},
			{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "queue"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr.To(resource.MustParse("30"))}}},
		},
		Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: ptr.To[int32](10),
			SelectPolicy:               ptr.To(autoscalingv2.MinChangePolicySelect),
			Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 50, PeriodSeconds: 15}},
			Tolerance:                  ptr.To(resource.MustParse("50m")),
		}},
	}
	window := int64(30)
	req := &Request{
		Target:   Target{Cluster: "c", Namespace: "ns", Name: "web"},
		Spec:     spec,
		Settings: Settings{Tolerance: ptr.To(0.2), InitialReadinessDelay: ptr.To(10 * time.Second)},
		Scale:    Scale{Replicas: 2, StatusReplicas: 2, Selector: "app=web"},
		Pods:     []*corev1.Pod{pod},
		ResourceMetrics: ResourceMetrics{Fetched: true, Items: []metricsv1beta1.PodMetrics{{
			ObjectMeta: metav1.ObjectMeta{Name: "web-1"}, Timestamp: metav1.NewTime(now), Window: metav1.Duration{Duration: 15 * time.Second},
			Containers: []metricsv1beta1.ContainerMetrics{{Name: "app", Usage: corev1.ResourceList{"cpu": resource.MustParse("300m")}}},
		}}},
		Metrics: []MetricValues{
			{},
			{Custom: []custommetricsv1beta2.MetricValue{{
				DescribedObject: corev1.ObjectReference{Kind: "Pod", Name: "web-1"},
				Timestamp:       metav1.NewTime(now), WindowSeconds: &window, Value: resource.MustParse("150m"),
			}}},
			{Err: errors.New("unable to fetch metrics from external metrics API: boom"), External: []externalmetricsv1beta1.ExternalMetricValue(nil)},
		},
	}
	got := recommendRequest(req)
	want := &setpointv1.RecommendRequest{
		Target: &setpointv1.TargetKey{Cluster: "c", Namespace: "ns", Name: "web"},
		Spec: &setpointv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: &setpointv1.CrossVersionObjectReference{ApiVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](1), // the API server's default
			MaxReplicas:    5,
			Metrics: []*setpointv1.MetricSpec{
				{Type: "Resource", Resource: &setpointv1.ResourceMetricSource{Name: "cpu", Target: &setpointv1.MetricTarget{Type: "Utilization", AverageUtilization: ptr.To[int32](60)}}},
				{Type: "Pods", Pods: &setpointv1.PodsMetricSource{
					Metric: &setpointv1.MetricIdentifier{Name: "rps", Selector: &setpointv1.LabelSelector{MatchLabels: map[string]string{"verb": "GET"}}},
					Target: &setpointv1.MetricTarget{Type: "AverageValue", AverageValue: "100m"}}},
				{Type: "External", External: &setpointv1.ExternalMetricSource{Metric: &setpointv1.MetricIdentifier{Name: "queue"}, Target: &setpointv1.MetricTarget{Type: "Value", Value: "30"}}},
			},
			Behavior: &setpointv1.HorizontalPodAutoscalerBehavior{
				ScaleDown: &setpointv1.ScalingRules{
					StabilizationWindowSeconds: ptr.To[int32](10), SelectPolicy: "Min", Tolerance: "50m",
					Policies: []*setpointv1.ScalingPolicy{{Type: "Percent", Value: 50, PeriodSeconds: 15}},
				},
				// Absent, so the API server's defaults.
				ScaleUp: &setpointv1.ScalingRules{
					StabilizationWindowSeconds: ptr.To[int32](0), SelectPolicy: "Max",
					Policies: []*setpointv1.ScalingPolicy{{Type: "Pods", Value: 4, PeriodSeconds: 15}, {Type: "Percent", Value: 100, PeriodSeconds: 15}},
				},
			},
		},
		Settings: &setpointv1.ControllerSettings{Tolerance: ptr.To(0.2), InitialReadinessDelay: durationpb.New(10 * time.Second)},
		Scale:    &setpointv1.Scale{Replicas: 2, StatusReplicas: 2, Selector: "app=web"},
		Pods: []*setpointv1.Pod{{
			Name: "web-1", Phase: "Running", Deleting: true, StartTime: timestamppb.New(start.Time),
			Ready: &setpointv1.PodReadyCondition{Status: "True", LastTransitionTime: timestamppb.New(ready.Time)},
			Containers: []*setpointv1.Container{
				{Name: "app", Requests: map[string]string{"cpu": "250m", "memory": "128Mi"}},
				{Name: "setup", Requests: map[string]string{"cpu": "1"}, Init: true},
				{Name: "proxy", Requests: map[string]string{"cpu": "50m"}, RestartableInit: true},
			},
			Requests: map[string]string{"cpu": "500m"},
			Overhead: map[string]string{"cpu": "10m"},
		}},
		ResourceMetrics: &setpointv1.ResourceMetrics{Items: []*setpointv1.PodMetrics{{
			Pod: "web-1", Timestamp: timestamppb.New(now), Window: durationpb.New(15 * time.Second),
			Containers: []*setpointv1.ContainerMetrics{{Name: "app", Usage: map[string]string{"cpu": "300m"}}},
		}}},
		Observations: []*setpointv1.MetricObservation{
			{},
			{Values: []*setpointv1.MetricValue{{Pod: "web-1", Value: "150m", Timestamp: timestamppb.New(now), Window: durationpb.New(30 * time.Second)}}},
			{Error: "unable to fetch metrics from external metrics API: boom"},
		},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("recommendRequest (-want +got):\n%s", diff)
	}
}

// TestRecommendRequestNoMetrics: an Autoscaler without metrics asks for
// 80% cpu utilization, as an HPA does, and its resource metrics fetch
// error is that metric's.
func TestRecommendRequestNoMetrics(t *testing.T) {
	req := &Request{
		Target:          Target{Cluster: "c", Namespace: "ns", Name: "web"},
		Spec:            v1alpha1.AutoscalerSpec{ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, MaxReplicas: 3},
		Scale:           Scale{Replicas: 1, StatusReplicas: 1, Selector: "app=web"},
		ResourceMetrics: ResourceMetrics{Fetched: true, Err: errors.New("boom")},
	}
	got := recommendRequest(req)
	want := &setpointv1.RecommendRequest{
		Target: &setpointv1.TargetKey{Cluster: "c", Namespace: "ns", Name: "web"},
		Spec: &setpointv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: &setpointv1.CrossVersionObjectReference{ApiVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](1),
			MaxReplicas:    3,
			Metrics: []*setpointv1.MetricSpec{{Type: "Resource", Resource: &setpointv1.ResourceMetricSource{
				Name: "cpu", Target: &setpointv1.MetricTarget{Type: "Utilization", AverageUtilization: ptr.To[int32](80)}}}},
		},
		Settings:        &setpointv1.ControllerSettings{},
		Scale:           &setpointv1.Scale{Replicas: 1, StatusReplicas: 1, Selector: "app=web"},
		ResourceMetrics: &setpointv1.ResourceMetrics{Error: "boom"},
		Observations:    []*setpointv1.MetricObservation{{Error: "boom"}},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("recommendRequest (-want +got):\n%s", diff)
	}
}

func TestRecommendationOf(t *testing.T) {
	d := &setpointv1.Decision{
		DecisionId: "d7", DesiredReplicas: 4, Rescale: true,
		Status: &setpointv1.HorizontalPodAutoscalerStatus{
			LastScaleTime: timestamppb.New(now),
			CurrentMetrics: []*setpointv1.MetricStatus{
				{Type: "Resource", Resource: &setpointv1.ResourceMetricStatus{Name: "cpu", Current: &setpointv1.MetricValueStatus{AverageValue: "300m", AverageUtilization: ptr.To[int32](120)}}},
				{},
			},
			Conditions: []*setpointv1.Condition{{Type: "ScalingLimited", Status: "True", Reason: "ScaleUpLimit", Message: "m", LastTransitionTime: timestamppb.New(now)}},
		},
		Explanation: &setpointv1.Explanation{
			CurrentReplicas: 2, Winner: 0, Proposal: 5,
			Metrics: []*setpointv1.MetricExplanation{{Name: "cpu resource utilization (percentage of request)", Outcome: "Scaled", Proposal: 5, RebalancedRatio: 2.4}},
			Steps:   []*setpointv1.Step{{Kind: "Limited", From: 5, To: 4, Reason: "ScaleUpLimit", Message: "limited by policy"}},
		},
	}
	got := recommendationOf(d)
	lst := metav1.NewTime(now)
	want := &Recommendation{
		DecisionID: "d7", DesiredReplicas: 4, Rescale: true,
		Reason:        "cpu resource utilization (percentage of request) above target",
		LastScaleTime: &lst,
		Conditions:    []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: "ScalingLimited", Status: "True", Reason: "ScaleUpLimit", Message: "m", LastTransitionTime: lst}},
		CurrentMetrics: []autoscalingv2.MetricStatus{
			{Type: "Resource", Resource: &autoscalingv2.ResourceMetricStatus{Name: "cpu", Current: autoscalingv2.MetricValueStatus{AverageValue: ptr.To(resource.MustParse("300m")), AverageUtilization: ptr.To[int32](120)}}},
			{},
		},
		Explanation: v1alpha1.Explanation{
			Summary:  "cpu resource utilization (percentage of request) proposed 5 (Scaled, ratio 2.40); Limited 5→4 (ScaleUpLimit); desired 4",
			Winner:   "cpu resource utilization (percentage of request)",
			Proposal: 5,
			Steps:    []v1alpha1.ExplanationStep{{Kind: "Limited", From: 5, To: 4, Reason: "ScaleUpLimit", Message: "limited by policy"}},
		},
		Metrics: []MetricProposal{{Proposal: 5}},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("recommendationOf (-want +got):\n%s", diff)
	}
}

func TestRescaleReasons(t *testing.T) {
	for _, tc := range []struct {
		name    string
		e       *setpointv1.Explanation
		desired int32
		want    string
	}{
		{"down", &setpointv1.Explanation{CurrentReplicas: 4, Proposal: 2, Winner: 0, Metrics: []*setpointv1.MetricExplanation{{Name: "m"}}}, 2, "All metrics below target"},
		{"up", &setpointv1.Explanation{CurrentReplicas: 4, Proposal: 6, Winner: 0, Metrics: []*setpointv1.MetricExplanation{{Name: "m"}}}, 5, "m above target"},
		// The controller takes the reason from the metrics' proposal before
		// stabilization and policies: equal to the current count, none, even
		// though a window then lowered the count.
		{"proposal equals current", &setpointv1.Explanation{CurrentReplicas: 4, Proposal: 4, Winner: 0, Metrics: []*setpointv1.MetricExplanation{{Name: "m"}}, Steps: []*setpointv1.Step{{Kind: "Stabilized"}}}, 3, ""},
		{"down, held above the proposal", &setpointv1.Explanation{CurrentReplicas: 8, Proposal: 2, Winner: 0, Metrics: []*setpointv1.MetricExplanation{{Name: "m"}}}, 6, "All metrics below target"},
		{"from zero to the minimum", &setpointv1.Explanation{CurrentReplicas: 0, Proposal: 0, Winner: 0, Metrics: []*setpointv1.MetricExplanation{{Name: "m"}}, Steps: []*setpointv1.Step{{Kind: "MinFromZero"}}}, 1, "Current number of replicas below Spec.MinReplicas"},
		{"above max", &setpointv1.Explanation{CurrentReplicas: 12, Winner: -1, Steps: []*setpointv1.Step{{Kind: "CurrentAboveMax"}}}, 10, "Current number of replicas above Spec.MaxReplicas"},
		{"below min", &setpointv1.Explanation{CurrentReplicas: 1, Winner: -1, Steps: []*setpointv1.Step{{Kind: "CurrentBelowMin"}}}, 2, "Current number of replicas below Spec.MinReplicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, got := explain(tc.e, tc.desired); got != tc.want {
				t.Errorf("reason = %q, want %q", got, tc.want)
			}
		})
	}
}
