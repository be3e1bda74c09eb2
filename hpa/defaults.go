package hpa

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
)

// The API server's defaults of an autoscaling/v2 HorizontalPodAutoscaler.
const (
	// DefaultMinReplicas is spec.minReplicas when absent, in replicas.
	DefaultMinReplicas int32 = 1
	// DefaultCPUUtilization is the target of the cpu metric that replaces
	// an empty spec.metrics, in percent of the pods' cpu requests.
	DefaultCPUUtilization int32 = 80
	// DefaultScaleUpStabilizationWindowSeconds is a present behavior's
	// scale-up stabilization window when absent, in seconds.
	DefaultScaleUpStabilizationWindowSeconds int32 = 0
)

// DefaultScaleUpPolicies are a present behavior's scale-up policies when
// absent: at most 4 pods or 100% more every 15 s, whichever is larger.
func DefaultScaleUpPolicies() []autoscalingv2.HPAScalingPolicy {
	return []autoscalingv2.HPAScalingPolicy{
		{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
		{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
	}
}

// DefaultScaleDownPolicies are a present behavior's scale-down policies
// when absent: at most 100% fewer every 15 s.
func DefaultScaleDownPolicies() []autoscalingv2.HPAScalingPolicy {
	return []autoscalingv2.HPAScalingPolicy{
		{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
	}
}

// DefaultMetric is the metric of a spec whose metrics are empty: cpu at
// DefaultCPUUtilization percent average utilization.
func DefaultMetric() autoscalingv2.MetricSpec {
	u := DefaultCPUUtilization
	return autoscalingv2.MetricSpec{
		Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricSource{
			Name:   corev1.ResourceCPU,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &u},
		},
	}
}

// Default returns a copy of s with the API server's defaults applied, as
// the controller reads a stored HPA (see the package documentation). It is
// idempotent, and s is left unchanged.
func Default(s autoscalingv2.HorizontalPodAutoscalerSpec) autoscalingv2.HorizontalPodAutoscalerSpec {
	out := *s.DeepCopy()
	if out.MinReplicas == nil {
		m := DefaultMinReplicas
		out.MinReplicas = &m
	}
	if len(out.Metrics) == 0 {
		out.Metrics = []autoscalingv2.MetricSpec{DefaultMetric()}
	}
	if b := out.Behavior; b != nil {
		window := DefaultScaleUpStabilizationWindowSeconds
		b.ScaleUp = defaultRules(b.ScaleUp, autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &window, Policies: DefaultScaleUpPolicies()})
		b.ScaleDown = defaultRules(b.ScaleDown, autoscalingv2.HPAScalingRules{Policies: DefaultScaleDownPolicies()})
	}
	return out
}

// defaultRules fills the absent fields of r (nil: every field) from def;
// selectPolicy defaults to Max. A policy list that is present, even empty,
// is kept, as the API server keeps it (validation then rejects it).
func defaultRules(r *autoscalingv2.HPAScalingRules, def autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	maxPolicy := autoscalingv2.MaxChangePolicySelect
	def.SelectPolicy = &maxPolicy
	if r == nil {
		return &def
	}
	if r.SelectPolicy != nil {
		def.SelectPolicy = r.SelectPolicy
	}
	if r.StabilizationWindowSeconds != nil {
		def.StabilizationWindowSeconds = r.StabilizationWindowSeconds
	}
	if r.Policies != nil {
		def.Policies = r.Policies
	}
	if r.Tolerance != nil {
		def.Tolerance = r.Tolerance
	}
	return &def
}
