package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/setpointhq/setpoint/agent/api/v1alpha1"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	custommetricsv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	"k8s.io/metrics/pkg/client/custom_metrics"
	"k8s.io/metrics/pkg/client/external_metrics"
)

// MetricsClients are the clients of the three metrics APIs. A nil client
// makes every fetch from its API fail with an error recorded per metric.
type MetricsClients struct {
	// Resource reads metrics.k8s.io (PodMetrics).
	Resource metricsclient.Interface
	// Custom reads custom.metrics.k8s.io (Pods and Object metrics).
	Custom custom_metrics.CustomMetricsClient
	// External reads external.metrics.k8s.io.
	External external_metrics.ExternalMetricsClient
}

// needsResourceMetrics reports whether the spec reads the resource metrics
// API: some Resource or ContainerResource metric, or no metrics at all (the
// HPA default is CPU utilization).
func needsResourceMetrics(spec *v1alpha1.AutoscalerSpec) bool {
	if len(spec.Metrics) == 0 {
		return true
	}
	for _, m := range spec.Metrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType || m.Type == autoscalingv2.ContainerResourceMetricSourceType {
			return true
		}
	}
	return false
}

// fetchMetrics reads every metric of spec for the pods matched by selector
// in namespace. It never fails as a whole: each error is recorded with the
// metric it belongs to. Errors are the metrics APIs' own, unwrapped: the
// service words them as the HPA controller does, and its decision carries
// each failed metric's message for the FailedGet*Metric Events.
func (c MetricsClients) fetchMetrics(ctx context.Context, namespace string, spec *v1alpha1.AutoscalerSpec, selector labels.Selector) (ResourceMetrics, []MetricValues, []time.Duration) {
	var (
		rm ResourceMetrics
		// took is each metric's fetch time; Resource and ContainerResource
		// metrics share the one resource metrics fetch.
		took         = make([]time.Duration, len(spec.Metrics))
		resourceTook time.Duration
	)
	if needsResourceMetrics(spec) {
		start := time.Now()
		rm.Fetched = true
		if c.Resource == nil {
			rm.Err = fmt.Errorf("no client for the resource metrics API")
		} else {
			list, err := c.Resource.MetricsV1beta1().PodMetricses(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
			if err != nil {
				rm.Err = err
			} else {
				rm.Items = list.Items
			}
		}
		resourceTook = time.Since(start)
	}
	values := make([]MetricValues, len(spec.Metrics))
	for i := range spec.Metrics {
		m := &spec.Metrics[i]
		start := time.Now()
		switch m.Type {
		case autoscalingv2.PodsMetricSourceType:
			values[i] = c.podsMetric(namespace, m.Pods, selector)
		case autoscalingv2.ObjectMetricSourceType:
			values[i] = c.objectMetric(namespace, m.Object)
		case autoscalingv2.ExternalMetricSourceType:
			values[i] = c.externalMetric(namespace, m.External)
		default:
			took[i] = resourceTook
			continue
		}
		took[i] = time.Since(start)
	}
	return rm, values, took
}

func (c MetricsClients) podsMetric(namespace string, src *autoscalingv2.PodsMetricSource, selector labels.Selector) MetricValues {
	if src == nil {
		return MetricValues{Err: fmt.Errorf("pods metric source is missing")}
	}
	if c.Custom == nil {
		return MetricValues{Err: fmt.Errorf("no client for the custom metrics API")}
	}
	metricSelector, err := metav1.LabelSelectorAsSelector(src.Metric.Selector)
	if err != nil {
		return MetricValues{Err: fmt.Errorf("invalid metric selector: %w", err)}
	}
	list, err := c.Custom.NamespacedMetrics(namespace).GetForObjects(schema.GroupKind{Kind: "Pod"}, selector, src.Metric.Name, metricSelector)
	if err != nil {
		return MetricValues{Err: err}
	}
	return MetricValues{Custom: list.Items}
}

func (c MetricsClients) objectMetric(namespace string, src *autoscalingv2.ObjectMetricSource) MetricValues {
	if src == nil {
		return MetricValues{Err: fmt.Errorf("object metric source is missing")}
	}
	if c.Custom == nil {
		return MetricValues{Err: fmt.Errorf("no client for the custom metrics API")}
	}
	metricSelector, err := metav1.LabelSelectorAsSelector(src.Metric.Selector)
	if err != nil {
		return MetricValues{Err: fmt.Errorf("invalid metric selector: %w", err)}
	}
	ref := src.DescribedObject
	gk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind).GroupKind()
	v, err := c.Custom.NamespacedMetrics(namespace).GetForObject(gk, ref.Name, src.Metric.Name, metricSelector)
	if err != nil {
		return MetricValues{Err: err}
	}
	return MetricValues{Custom: []custommetricsv1beta2.MetricValue{*v}}
}

func (c MetricsClients) externalMetric(namespace string, src *autoscalingv2.ExternalMetricSource) MetricValues {
	if src == nil {
		return MetricValues{Err: fmt.Errorf("external metric source is missing")}
	}
	if c.External == nil {
		return MetricValues{Err: fmt.Errorf("no client for the external metrics API")}
	}
	metricSelector, err := metav1.LabelSelectorAsSelector(src.Metric.Selector)
	if err != nil {
		return MetricValues{Err: fmt.Errorf("invalid metric selector: %w", err)}
	}
	list, err := c.External.NamespacedMetrics(namespace).List(src.Metric.Name, metricSelector)
	if err != nil {
		return MetricValues{Err: err}
	}
	return MetricValues{External: list.Items}
}
