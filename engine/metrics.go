package engine

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// evaluate computes one metric's proposal and status, as upstream's
// computeReplicasForMetric. On failure it returns the ScalingActive reason
// and the error, wrapped as upstream wraps it.
func (c *calculator) evaluate(i int, specReplicas int32, values *metricValues) (metricResult, *metricError) {
	spec := &c.in.Spec.Metrics[i]
	var obs Observation
	if i < len(c.in.Observations) {
		obs = c.in.Observations[i]
	}
	r := metricResult{explain: MetricExplanation{Name: metricName(spec)}, values: values}
	var reason string
	var err error
	// shown is the metric's error as the controller shows it in the
	// ScalingActive condition and the FailedGet*Metric Event: before the
	// wrapping of the error it returns.
	var shown error
	switch spec.Type {
	case ResourceSource, ContainerResourceSource:
		reason = "FailedGetResourceMetric"
		if spec.Type == ContainerResourceSource {
			reason = "FailedGetContainerResourceMetric"
		}
		err = c.evaluateResource(spec, obs, specReplicas, &r)
		shown = err
		if err != nil {
			if spec.Type == ContainerResourceSource {
				err = fmt.Errorf("failed to get %s container metric value: %w", spec.Container, err)
			} else {
				err = fmt.Errorf("failed to get %s resource metric value: %w", spec.Resource, err)
			}
		}
	case PodsSource:
		reason = "FailedGetPodsMetric"
		err = c.evaluatePods(spec, obs, specReplicas, &r)
		shown = err
		if err != nil {
			err = fmt.Errorf("failed to get pods metric value: %w", err)
		}
	case ObjectSource:
		reason = "FailedGetObjectMetric"
		err = c.evaluateObject(spec, obs, specReplicas, &r)
		shown = err
		if err != nil {
			err = fmt.Errorf("failed to get object metric value: %w", err)
		}
	case ExternalSource:
		reason = "FailedGetExternalMetric"
		err = c.evaluateExternal(spec, obs, specReplicas, &r)
		shown = err
		if err != nil {
			err = fmt.Errorf("failed to get %s external metric value: %w", spec.Metric.Name, err)
		}
	default:
		reason = "InvalidMetricSourceType"
		err = fmt.Errorf("unknown metric source type %q", string(spec.Type))
		shown = err
	}
	if err != nil {
		if w, ok := shown.(*wrappedError); ok {
			shown = w.shown
		}
		r.explain.Outcome = OutcomeFailed
		r.explain.Err = shown.Error()
		return r, &metricError{reason: reason, err: err, shown: shown}
	}
	r.explain.Proposal = r.proposal
	return r, nil
}

// The names of the commonest metrics, and the ScalingActive messages of
// their proposals: a decision on them builds neither.
const (
	cpuUtilizationName    = "cpu resource utilization (percentage of request)"
	memoryUtilizationName = "memory resource utilization (percentage of request)"
	validMetricPrefix     = "the HPA was able to successfully calculate a replica count from "
)

// validMetricMessage is the ScalingActive message when the proposal of the
// metric named name won.
func validMetricMessage(name string) string {
	switch name {
	case cpuUtilizationName:
		return validMetricPrefix + cpuUtilizationName
	case memoryUtilizationName:
		return validMetricPrefix + memoryUtilizationName
	}
	return validMetricPrefix + name
}

// metricName describes a metric the way upstream names it in the
// ScalingActive message and rescale reasons.
func metricName(spec *MetricSpec) string {
	switch spec.Type {
	case ResourceSource:
		if spec.Target.Type == AverageValueTarget {
			return spec.Resource + " resource"
		}
		switch spec.Resource { // the common names, without building them
		case "cpu":
			return cpuUtilizationName
		case "memory":
			return memoryUtilizationName
		}
		return spec.Resource + " resource utilization (percentage of request)"
	case ContainerResourceSource:
		if spec.Target.Type == AverageValueTarget {
			return spec.Resource + " resource"
		}
		return spec.Resource + " container resource utilization (percentage of request)"
	case PodsSource:
		return "pods metric " + spec.Metric.Name
	case ObjectSource:
		if spec.Target.Type == ValueTarget {
			return spec.DescribedObject.Kind + " metric " + spec.Metric.Name
		}
		return externalMetricName(spec.Metric.Name, spec.Metric.Selector)
	case ExternalSource:
		return externalMetricName(spec.Metric.Name, spec.Metric.Selector)
	}
	return string(spec.Type)
}

// wrappedError is a metric error the controller shows (condition, Event)
// in one form and returns, for the FailedComputeMetricsReplicas text, wrapped
// once more.
type wrappedError struct {
	shown, err error
}

func (e *wrappedError) Error() string { return e.err.Error() }
func (e *wrappedError) Unwrap() error { return e.err }

// externalMetricName is "external metric " + name + "(" + what upstream's
// %+v of the *LabelSelector s prints + ")", built at once.
func externalMetricName(name string, s *LabelSelector) string {
	var b strings.Builder
	b.Grow(len("external metric ()") + len(name) + labelSelectorSize(s))
	b.WriteString("external metric ")
	b.WriteString(name)
	b.WriteString("(")
	writeLabelSelector(&b, s)
	b.WriteString(")")
	return b.String()
}

// labelSelectorString is what the Kubernetes controller's %v of a
// *metav1.LabelSelector prints (its generated String method): labels in key
// order, then the expressions, e.g.
// "&LabelSelector{MatchLabels:map[string]string{app: web,},MatchExpressions:[]LabelSelectorRequirement{},}".
func labelSelectorString(s *LabelSelector) string {
	var b strings.Builder
	b.Grow(labelSelectorSize(s))
	writeLabelSelector(&b, s)
	return b.String()
}

// labelSelectorSize is about the length of labelSelectorString(s).
func labelSelectorSize(s *LabelSelector) int {
	if s == nil {
		return len("nil")
	}
	n := len("&LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{},}")
	for k, v := range s.MatchLabels {
		n += len(k) + len(v) + len(": ,")
	}
	for _, e := range s.MatchExpressions {
		n += len("LabelSelectorRequirement{Key:,Operator:,Values:[],},") + len(e.Key) + len(e.Operator)
		for _, v := range e.Values {
			n += len(v) + 1
		}
	}
	return n
}

// writeLabelSelector writes labelSelectorString(s) to b.
func writeLabelSelector(b *strings.Builder, s *LabelSelector) {
	if s == nil {
		b.WriteString("nil")
		return
	}
	b.WriteString("&LabelSelector{MatchLabels:map[string]string{")
	var buf [8]string
	keys := buf[:0]
	for k := range s.MatchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys { // as "%v: %v," prints them
		b.WriteString(k)
		b.WriteString(": ")
		b.WriteString(s.MatchLabels[k])
		b.WriteString(",")
	}
	b.WriteString("},MatchExpressions:[]LabelSelectorRequirement{")
	for _, e := range s.MatchExpressions {
		// as "LabelSelectorRequirement{Key:%v,Operator:%v,Values:%v,}," prints them
		b.WriteString("LabelSelectorRequirement{Key:")
		b.WriteString(e.Key)
		b.WriteString(",Operator:")
		b.WriteString(e.Operator)
		b.WriteString(",Values:[")
		for i, v := range e.Values {
			if i > 0 {
				b.WriteString(" ")
			}
			b.WriteString(v)
		}
		b.WriteString("],},")
	}
	b.WriteString("},}")
}

// evaluateResource handles Resource and ContainerResource metrics.
func (c *calculator) evaluateResource(spec *MetricSpec, obs Observation, current int32, r *metricResult) error {
	format := DecimalSI
	if spec.Resource == "memory" {
		format = BinarySI
	}
	r.status = MetricStatus{Type: spec.Type, Resource: spec.Resource, Container: spec.Container}
	if spec.Target.Type == AverageValueTarget {
		items, err := c.resourceItems(spec.Resource, obs.Err)
		if err != nil {
			return fmt.Errorf("failed to get %s usage: %w", spec.Resource, err)
		}
		metrics := c.resourceSamples(items, spec.Resource, spec.Container)
		proposal, average, err := c.plainReplicas(metrics, current, spec.Target.Milli, spec.Resource, &r.explain)
		if err != nil {
			return fmt.Errorf("failed to get %s usage: %w", spec.Resource, err)
		}
		r.proposal = proposal
		r.status.AverageValue = r.quantity(average, format)
		return nil
	}
	proposal, utilization, rawAverage, err := c.resourceUtilization(current, spec.Target.Utilization, spec.Resource, spec.Container, obs.Err, &r.explain)
	if err != nil {
		return fmt.Errorf("failed to get %s utilization: %w", spec.Resource, err)
	}
	r.proposal = proposal
	r.status.AverageValue = r.quantity(rawAverage, format)
	r.values.utilization = utilization
	r.status.AverageUtilization = &r.values.utilization
	return nil
}

// evaluatePods handles Pods metrics.
func (c *calculator) evaluatePods(spec *MetricSpec, obs Observation, current int32, r *metricResult) error {
	name := spec.Metric.Name
	if obs.Err != "" {
		return fmt.Errorf("unable to get metric %s: unable to fetch metrics from custom metrics API: %s", name, obs.Err)
	}
	if len(obs.Values) == 0 {
		return fmt.Errorf("unable to get metric %s: no metrics returned from custom metrics API", name)
	}
	metrics := c.newSamples()
	metrics.values = obs.Values
	pods, next := c.in.Pods, 0
	for k := range obs.Values {
		v := &obs.Values[k]
		if sample := (podSample{value: v.Milli, src: int32(k)}); !metrics.putInOrder(pods, &next, v.Pod, sample) {
			c.addAway(metrics, v.Pod, sample, &next)
		}
	}
	proposal, average, err := c.plainReplicas(metrics, current, spec.Target.Milli, "", &r.explain)
	if err != nil {
		return err
	}
	r.proposal = proposal
	r.status = MetricStatus{Type: PodsSource, Metric: spec.Metric, AverageValue: r.quantity(average, DecimalSI)}
	return nil
}

// evaluateObject handles Object metrics.
func (c *calculator) evaluateObject(spec *MetricSpec, obs Observation, specReplicas int32, r *metricResult) error {
	ref := spec.DescribedObject
	fetchErr := func(msg string) error {
		return fmt.Errorf("unable to get metric %s on %s %s/%s: %s", spec.Metric.Name, ref.Kind, c.in.Namespace, ref.Name, msg)
	}
	var value int64
	switch {
	case obs.Err != "":
		err := fetchErr("unable to fetch metrics from custom metrics API: " + obs.Err)
		if spec.Target.Type == AverageValueTarget {
			return &wrappedError{shown: err, err: fmt.Errorf("failed to get %s object metric: %w", spec.Metric.Name, err)}
		}
		return err
	case len(obs.Values) == 0:
		err := fetchErr("no metrics returned from custom metrics API")
		if spec.Target.Type == AverageValueTarget {
			return &wrappedError{shown: err, err: fmt.Errorf("failed to get %s object metric: %w", spec.Metric.Name, err)}
		}
		return err
	default:
		value = obs.Values[0].Milli
	}
	r.status = MetricStatus{Type: ObjectSource, Metric: spec.Metric, DescribedObject: ref}
	r.explain.Current, r.explain.Target = value, spec.Target.Milli
	switch spec.Target.Type {
	case ValueTarget:
		ratio := float64(value) / float64(spec.Target.Milli)
		proposal, err := c.ratioReplicas(specReplicas, ratio, &r.explain)
		if err != nil {
			return err
		}
		r.proposal = proposal
		r.status.Value = r.quantity(value, DecimalSI)
	case AverageValueTarget:
		proposal, average := c.perPodReplicas(value, spec.Target.Milli, false, &r.explain)
		r.proposal = proposal
		r.status.AverageValue = r.quantity(average, DecimalSI)
	default:
		return errors.New("invalid object metric source: neither a value target nor an average value target was set")
	}
	return nil
}

// evaluateExternal handles External metrics: the series are summed.
func (c *calculator) evaluateExternal(spec *MetricSpec, obs Observation, specReplicas int32, r *metricResult) error {
	name := spec.Metric.Name
	var fetchErr error
	switch {
	case obs.Err != "":
		fetchErr = fmt.Errorf("unable to get external metric %s/%s/%s: unable to fetch metrics from external metrics API: %s", c.in.Namespace, name, labelSelectorString(spec.Metric.Selector), obs.Err)
	case len(obs.Values) == 0:
		fetchErr = fmt.Errorf("unable to get external metric %s/%s/%s: no metrics returned from external metrics API", c.in.Namespace, name, labelSelectorString(spec.Metric.Selector))
	}
	if fetchErr != nil {
		// The condition and Event carry fetchErr; the error the controller
		// returns wraps it once more, differently for each target type.
		if spec.Target.Type == ValueTarget {
			return &wrappedError{shown: fetchErr, err: fmt.Errorf("failed to get external metric %s: %w", name, fetchErr)}
		}
		return &wrappedError{shown: fetchErr, err: fmt.Errorf("failed to get %s external metric: %w", name, fetchErr)}
	}
	r.status = MetricStatus{Type: ExternalSource, Metric: spec.Metric}
	var total int64
	switch spec.Target.Type {
	case AverageValueTarget:
		for _, v := range obs.Values {
			total += v.Milli
			if total < 0 { // int64 overflow
				total = math.MaxInt64
				break
			}
		}
		proposal, average := c.perPodReplicas(total, spec.Target.Milli, true, &r.explain)
		r.proposal = proposal
		r.status.AverageValue = r.quantity(average, DecimalSI)
	case ValueTarget:
		for _, v := range obs.Values {
			if v.Milli > 0 && total > math.MaxInt64-v.Milli {
				total = math.MaxInt64
				break
			}
			total += v.Milli
		}
		r.explain.Current, r.explain.Target = total, spec.Target.Milli
		ratio := float64(total) / float64(spec.Target.Milli)
		proposal, err := c.ratioReplicas(specReplicas, ratio, &r.explain)
		if err != nil {
			return err
		}
		r.proposal = proposal
		r.status.Value = r.quantity(total, DecimalSI)
	default:
		return errors.New("invalid external metric source: neither a value target nor an average value target was set")
	}
	return nil
}
