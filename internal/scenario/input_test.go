package scenario

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	custommetrics "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	"k8s.io/utils/ptr"
)

// TestSameMetric: custom metric selectors match by their canonical
// string, whatever order their requirements and values are written in.
func TestSameMetric(t *testing.T) {
	sel := func(labels map[string]string, exprs ...metav1.LabelSelectorRequirement) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: labels, MatchExpressions: exprs}
	}
	in := func(key string, values ...string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: key, Operator: metav1.LabelSelectorOpIn, Values: values}
	}
	for _, tc := range []struct {
		name      string
		held      *metav1.LabelSelector
		want      *metav1.LabelSelector
		heldName  string
		wantMatch bool
	}{
		{"both absent", nil, nil, "rps", true},
		{"other name", nil, nil, "qps", false},
		{"absent vs set", nil, sel(map[string]string{"a": "1"}), "rps", false},
		{"same labels", sel(map[string]string{"a": "1", "b": "2"}), sel(map[string]string{"b": "2", "a": "1"}), "rps", true},
		{"expressions in another order", sel(nil, in("b", "x"), in("a", "y", "z")), sel(nil, in("a", "z", "y"), in("b", "x")), "rps", true},
		{"label vs single-value In: other strings", sel(map[string]string{"a": "1"}), sel(nil, in("a", "1")), "rps", false},
		{"different values", sel(nil, in("a", "1")), sel(nil, in("a", "2")), "rps", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sameMetric(tc.heldName, tc.held, autoscalingv2.MetricIdentifier{Name: "rps", Selector: tc.want})
			if got != tc.wantMatch {
				t.Errorf("sameMetric = %v, want %v", got, tc.wantMatch)
			}
		})
	}
}

// TestSpecAt: a step's spec is in force from that step until the next
// edit; before the first edit, hpa.spec is.
func TestSpecAt(t *testing.T) {
	spec := func(max int32) *autoscalingv2.HorizontalPodAutoscalerSpec {
		return &autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](1), MaxReplicas: max}
	}
	sc := &Scenario{Steps: []Step{{}, {Spec: spec(7)}, {}, {Spec: spec(3)}, {}}}
	sc.HPA.Spec = *spec(5)
	var got []int32
	for i := range sc.Steps {
		got = append(got, sc.SpecAt(i).MaxReplicas)
	}
	if diff := cmp.Diff([]int32{5, 7, 7, 3, 3}, got); diff != "" {
		t.Errorf("maxReplicas by step (-want +got):\n%s", diff)
	}
}

// TestReadingFollowsEdit: the metrics APIs are asked for the metrics of
// the spec in force, so an edit that adds a metric is answered at once.
func TestReadingFollowsEdit(t *testing.T) {
	pods := func(name string) autoscalingv2.MetricSpec {
		return autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: name},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("1"))}}}
	}
	held := []custommetrics.MetricValue{
		{DescribedObject: corev1Ref("p1"), Metric: custommetrics.MetricIdentifier{Name: "a"}, Value: resource.MustParse("1")},
		{DescribedObject: corev1Ref("p1"), Metric: custommetrics.MetricIdentifier{Name: "b"}, Value: resource.MustParse("2")},
	}
	edited := autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](1), MaxReplicas: 5, Metrics: []autoscalingv2.MetricSpec{pods("a"), pods("b")}}
	sc := &Scenario{Steps: []Step{{Time: time.Unix(0, 0), CustomMetrics: held}, {Time: time.Unix(15, 0), Spec: &edited, CustomMetrics: held}}}
	sc.HPA.Spec = autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](1), MaxReplicas: 5, Metrics: []autoscalingv2.MetricSpec{pods("a")}}
	for i, want := range []int{1, 2} {
		req := sc.Request(i)
		if n := len(req.GetSpec().GetMetrics()); n != want {
			t.Errorf("step %d: %d spec metrics, want %d", i, n, want)
		}
		if n := len(req.GetObservations()); n != want {
			t.Errorf("step %d: %d observations, want %d", i, n, want)
		}
	}
	if v := sc.Request(1).GetObservations()[1].GetValues(); len(v) != 1 || v[0].GetValue() != "2" {
		t.Errorf("step 1: metric b answered %v, want the value 2", v)
	}
}

func corev1Ref(pod string) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "Pod", Name: pod}
}
