package engine

import "testing"

// TestExternalMetricName: an External metric's name carries its selector
// as the Kubernetes controller's %+v of a *metav1.LabelSelector prints it
// (labels in key order, then expressions with their values in brackets).
func TestExternalMetricName(t *testing.T) {
	tests := []struct {
		name     string
		selector *LabelSelector
		want     string
	}{
		{"nil", nil, "external metric q(nil)"},
		{"empty", &LabelSelector{},
			"external metric q(&LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{},})"},
		{"labels", &LabelSelector{MatchLabels: map[string]string{"topic": "events", "env": "prod"}},
			"external metric q(&LabelSelector{MatchLabels:map[string]string{env: prod,topic: events,},MatchExpressions:[]LabelSelectorRequirement{},})"},
		{"expressions", &LabelSelector{MatchExpressions: []LabelSelectorRequirement{
			{Key: "a", Operator: "In", Values: []string{"x", "y"}}, {Key: "b", Operator: "Exists"}}},
			"external metric q(&LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{" +
				"LabelSelectorRequirement{Key:a,Operator:In,Values:[x y],},LabelSelectorRequirement{Key:b,Operator:Exists,Values:[],},},})"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &MetricSpec{Type: ExternalSource, Metric: MetricIdentifier{Name: "q", Selector: tt.selector}}
			if got := metricName(spec); got != tt.want {
				t.Errorf("metricName = %q\nwant          %q", got, tt.want)
			}
		})
	}
}
