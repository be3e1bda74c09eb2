package agent

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// An Autoscaler's fallback and schedules reach the API's spec field for
// field; without them the request has none.
func TestRecommendRequestAhead(t *testing.T) {
	req := &Request{
		Target: Target{Cluster: "c", Namespace: "ns", Name: "web"},
		Spec: v1alpha1.AutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MaxReplicas:    30,
			Fallback:       &v1alpha1.Fallback{FailureDuration: &metav1.Duration{Duration: 45 * time.Second}, Behavior: "currentReplicasIfHigher", Replicas: 12},
			Schedules: []v1alpha1.ScheduleWindow{
				{Name: "business-hours", TimeZone: "Europe/Berlin", Start: "0 8 * * 1-5", End: "0 18 * * 1-5", MinReplicas: 10},
				{Name: "batch", Start: "@daily", Duration: &metav1.Duration{Duration: 2 * time.Hour}, MinReplicas: 4},
			},
		},
		Scale:           Scale{Replicas: 1, StatusReplicas: 1, Selector: "app=web"},
		ResourceMetrics: ResourceMetrics{Fetched: true, Err: errors.New("boom")},
	}
	got := recommendRequest(req).GetSpec()
	wantFallback := &setpointv1.Fallback{FailureDuration: durationpb.New(45 * time.Second), Behavior: "currentReplicasIfHigher", Replicas: 12}
	wantSchedules := []*setpointv1.ScheduleWindow{
		{Name: "business-hours", TimeZone: "Europe/Berlin", Start: "0 8 * * 1-5", End: "0 18 * * 1-5", MinReplicas: 10},
		{Name: "batch", Start: "@daily", Duration: durationpb.New(2 * time.Hour), MinReplicas: 4},
	}
	if diff := cmp.Diff(wantFallback, got.GetFallback(), protocmp.Transform()); diff != "" {
		t.Errorf("fallback (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantSchedules, got.GetSchedules(), protocmp.Transform()); diff != "" {
		t.Errorf("schedules (-want +got):\n%s", diff)
	}

	req.Spec.Fallback, req.Spec.Schedules = nil, nil
	if s := recommendRequest(req).GetSpec(); s.GetFallback() != nil || s.GetSchedules() != nil || s.GetForecast() != nil {
		t.Errorf("without them: fallback %v, schedules %v, forecast %v", s.GetFallback(), s.GetSchedules(), s.GetForecast())
	}
	req.Spec.Forecast = &v1alpha1.Forecast{LeadTime: &metav1.Duration{Duration: 5 * time.Minute}, MaxErrorPercent: 20}
	wantForecast := &setpointv1.Forecast{LeadTime: durationpb.New(5 * time.Minute), MaxError: 0.2}
	if diff := cmp.Diff(wantForecast, recommendRequest(req).GetSpec().GetForecast(), protocmp.Transform()); diff != "" {
		t.Errorf("forecast (-want +got):\n%s", diff)
	}
}

// The measured pod start-up is sent as pod_startup, and only when measured.
func TestRecommendRequestPodStartup(t *testing.T) {
	req := &Request{
		Target: Target{Cluster: "c", Namespace: "ns", Name: "web"},
		Spec: v1alpha1.AutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MaxReplicas:    30,
		},
		Scale: Scale{Replicas: 1, StatusReplicas: 1, Selector: "app=web"},
	}
	if got := recommendRequest(req).GetPodStartup(); got != nil {
		t.Errorf("not measured: pod_startup %v, want absent", got)
	}
	req.PodStartup = PodStartup{Time: 95 * time.Second, Pods: 4}
	if got := recommendRequest(req).GetPodStartup(); got.AsDuration() != 95*time.Second {
		t.Errorf("measured 95s on 4 pods: pod_startup %v", got)
	}
}

// The annotation sets an HPA's fallback and schedules with the
// Autoscaler's schema; without it nothing is set, and a value that does
// not parse (or names an unknown field) is an error.
func TestAheadAnnotation(t *testing.T) {
	const valid = `{"fallback": {"failureDuration": "45s", "behavior": "static", "replicas": 5},
		"schedules": [{"name": "business-hours", "timeZone": "Europe/Berlin", "start": "0 8 * * 1-5", "end": "0 18 * * 1-5", "minReplicas": 10}],
		"forecast": {"leadTime": "5m", "maxErrorPercent": 20}}`
	var spec v1alpha1.AutoscalerSpec
	if err := setAheadAnnotation(&spec, map[string]string{"other": "x"}); err != nil || spec.Fallback != nil || spec.Schedules != nil {
		t.Errorf("without the annotation: %v, fallback %v, schedules %v", err, spec.Fallback, spec.Schedules)
	}
	if err := setAheadAnnotation(&spec, map[string]string{AheadAnnotation: valid}); err != nil {
		t.Fatal(err)
	}
	want := v1alpha1.AutoscalerSpec{
		Fallback:  &v1alpha1.Fallback{FailureDuration: &metav1.Duration{Duration: 45 * time.Second}, Behavior: "static", Replicas: 5},
		Schedules: []v1alpha1.ScheduleWindow{{Name: "business-hours", TimeZone: "Europe/Berlin", Start: "0 8 * * 1-5", End: "0 18 * * 1-5", MinReplicas: 10}},
		Forecast:  &v1alpha1.Forecast{LeadTime: &metav1.Duration{Duration: 5 * time.Minute}, MaxErrorPercent: 20},
	}
	if diff := cmp.Diff(want, spec); diff != "" {
		t.Errorf("annotated spec (-want +got):\n%s", diff)
	}
	for _, bad := range []string{
		`{"fallback": {"replicas": "five"}}`,
		`{"fallbak": {"replicas": 5}}`,
		`{"forecast": {"lead": "5m"}}`,
		`{"schedules": [{"name": "w", "start": "@daily", "duration": "2h", "minReplicas": 1, "zone": "UTC"}]}`,
		`{"fallback": {}} {}`,
		`not json`,
		`{"schedules": [` + strings.Repeat(`{"name": "w", "start": "@daily", "duration": "2h", "minReplicas": 1},`, 1000) + `]}`,
	} {
		var s v1alpha1.AutoscalerSpec
		if err := setAheadAnnotation(&s, map[string]string{AheadAnnotation: bad}); err == nil || !strings.Contains(err.Error(), AheadAnnotation) {
			t.Errorf("%.60s: error %v; want one naming the annotation", bad, err)
		}
	}
}

// The annotation shown in docs/native-hpa.md parses.
func TestAheadAnnotationDocExample(t *testing.T) {
	b, err := os.ReadFile("../docs/native-hpa.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "    "+AheadAnnotation+": |\n")
	value, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatalf("docs/native-hpa.md shows no %s annotation", AheadAnnotation)
	}
	var spec v1alpha1.AutoscalerSpec
	if err := setAheadAnnotation(&spec, map[string]string{AheadAnnotation: value}); err != nil {
		t.Fatalf("the documented annotation: %v", err)
	}
	if spec.Fallback == nil || len(spec.Schedules) != 1 {
		t.Errorf("the documented annotation sets fallback %v and %d windows; want both", spec.Fallback, len(spec.Schedules))
	}
}
