package engine

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// tolerances are the usage-ratio tolerances of the two directions.
type tolerances struct {
	down, up float64 // fractions: 0.1 is 10%
}

// within reports whether ratio is close enough to 1 to leave the count
// alone; both bounds are inclusive.
func (t tolerances) within(ratio float64) bool {
	return 1.0-t.down <= ratio && ratio <= 1.0+t.up
}

// podSample is one pod's value of a pod-based metric, in milli-units.
type podSample struct {
	value     int64
	timestamp time.Time
	window    time.Duration
}

// podGroups is how the pods of a target fall into upstream's groups.
type podGroups struct {
	ready                     int
	unready, missing, ignored map[string]bool
}

// metricResult is what evaluating one metric yields.
type metricResult struct {
	proposal int32
	status   MetricStatus
	explain  MetricExplanation
}

// metricError is a failed metric: its error text and the reason of the
// ScalingActive=False condition upstream would set for it.
type metricError struct {
	reason string
	err    error
}

// calculator evaluates metrics for one input.
type calculator struct {
	in   *Input
	tols tolerances
}

// groupPods sorts pods into ready, unready, missing and ignored, exactly as
// upstream's groupPods: readiness only matters for cpu.
func (c *calculator) groupPods(metrics map[string]podSample, resource string) podGroups {
	g := podGroups{unready: map[string]bool{}, missing: map[string]bool{}, ignored: map[string]bool{}}
	s := &c.in.Settings
	for i := range c.in.Pods {
		pod := &c.in.Pods[i]
		if pod.Deleting || pod.Phase == PodFailed {
			g.ignored[pod.Name] = true
			continue
		}
		if pod.Phase == PodPending {
			g.unready[pod.Name] = true
			continue
		}
		metric, found := metrics[pod.Name]
		if !found {
			g.missing[pod.Name] = true
			continue
		}
		if resource == "cpu" {
			var unready bool
			ready := pod.Ready
			if ready == nil || pod.StartTime.IsZero() {
				unready = true
			} else if pod.StartTime.Add(s.CPUInitializationPeriod).After(c.in.Now) {
				// Still initializing: the sample must be a full window
				// younger than the last readiness transition.
				unready = ready.Status == ConditionFalse || metric.timestamp.Before(ready.LastTransitionTime.Add(metric.window))
			} else {
				// Unready and never ready since its start.
				unready = ready.Status == ConditionFalse && pod.StartTime.Add(s.InitialReadinessDelay).After(ready.LastTransitionTime)
			}
			if unready {
				g.unready[pod.Name] = true
				continue
			}
		}
		g.ready++
	}
	return g
}

// removeGroups drops the samples of ignored and unready pods.
func removeGroups(metrics map[string]podSample, g podGroups) {
	for name := range g.ignored {
		delete(metrics, name)
	}
	for name := range g.unready {
		delete(metrics, name)
	}
}

// resourceSamples turns the resource metrics API answer into per-pod
// samples of resource: the sum over the pod's containers (a pod missing the
// resource in any container, or without containers, has no sample), or the
// named container's value when container is set.
func resourceSamples(items []PodUsage, resource, container string) map[string]podSample {
	res := make(map[string]podSample, len(items))
	for _, m := range items {
		if container != "" {
			for _, cu := range m.Containers {
				if cu.Name != container {
					continue
				}
				if v, ok := cu.Usage[resource]; ok {
					res[m.Pod] = podSample{value: v, timestamp: m.Timestamp, window: m.Window}
				}
				break
			}
			continue
		}
		var sum int64
		missing := len(m.Containers) == 0
		for _, cu := range m.Containers {
			v, ok := cu.Usage[resource]
			if !ok {
				missing = true
				break
			}
			sum += v
		}
		if !missing {
			res[m.Pod] = podSample{value: sum, timestamp: m.Timestamp, window: m.Window}
		}
	}
	return res
}

// requests returns each pod's request of resource in milli-units, as
// upstream's calculateRequests: with pod-level requests and no container
// named, Kubernetes' pod request aggregate (podRequest); otherwise the named
// container's request or the sum over containers and sidecars. Every pod
// must have the request.
func (c *calculator) requests(resource, container string) (map[string]int64, error) {
	out := make(map[string]int64, len(c.in.Pods))
	for i := range c.in.Pods {
		pod := &c.in.Pods[i]
		if container == "" && podLevelRequestsSet(pod.Requests) {
			v, ok := podRequest(pod, resource)
			if !ok {
				return nil, fmt.Errorf("missing pod-level request for %s in Pod %s", resource, pod.Name)
			}
			out[pod.Name] = v
			continue
		}
		var sum int64
		found := false
		for _, ct := range pod.Containers {
			if ct.Init || (container != "" && ct.Name != container) {
				continue
			}
			v, ok := ct.Requests[resource]
			if !ok {
				return nil, fmt.Errorf("missing request for %s in container %s of Pod %s", resource, ct.Name, pod.Name)
			}
			sum += v
			if container != "" {
				found = true
				break
			}
		}
		if container != "" && !found {
			return nil, fmt.Errorf("container %s not found in Pod %s", container, pod.Name)
		}
		out[pod.Name] = sum
	}
	return out, nil
}

// podRequest is Kubernetes' pod request of one resource when the pod sets
// pod-level requests (component-helpers' PodRequests): the pod-level value
// when set, otherwise the containers' aggregate — the sum over containers
// and sidecars, or the largest init-container need if greater, each init
// container counting the sidecars started before it — plus the overhead.
// ok is false when nothing in the pod names the resource.
func podRequest(pod *Pod, resource string) (int64, bool) {
	var total, sidecars, initMax int64
	ok := false
	add := func(dst *int64, reqs map[string]int64) int64 {
		v, has := reqs[resource]
		ok = ok || has
		*dst += v
		return v
	}
	for _, ct := range pod.Containers {
		switch {
		case ct.Sidecar:
			add(&total, ct.Requests)
			add(&sidecars, ct.Requests)
			initMax = max(initMax, sidecars)
		case ct.Init:
			var need int64
			add(&need, ct.Requests)
			initMax = max(initMax, need+sidecars)
		default:
			add(&total, ct.Requests)
		}
	}
	total = max(total, initMax)
	if v, has := pod.Requests[resource]; has && supportedPodLevel(resource) {
		total, ok = v, true
	}
	add(&total, pod.Overhead)
	return total, ok
}

// podLevelRequestsSet reports whether pod-level requests name a resource
// Kubernetes supports at pod level (cpu, memory, huge pages); only then do
// they take precedence over the containers' requests.
func podLevelRequestsSet(requests map[string]int64) bool {
	for name := range requests {
		if supportedPodLevel(name) {
			return true
		}
	}
	return false
}

// supportedPodLevel reports whether Kubernetes supports a resource in
// pod-level requests.
func supportedPodLevel(name string) bool {
	return name == "cpu" || name == "memory" || strings.HasPrefix(name, "hugepages-")
}

// utilizationRatio is upstream's GetResourceUtilizationRatio: samples
// without a request are extraneous and skipped; the utilization is an
// integer percent, truncated.
func utilizationRatio(metrics map[string]podSample, requests map[string]int64, target int32) (ratio float64, utilization int32, rawAverage int64, err error) {
	var metricsTotal, requestsTotal int64
	n := 0
	for name, m := range metrics {
		req, ok := requests[name]
		if !ok {
			continue
		}
		metricsTotal += m.value
		requestsTotal += req
		n++
	}
	if requestsTotal == 0 {
		return 0, 0, 0, errors.New("no metrics returned matched known pods")
	}
	utilization = int32((metricsTotal * 100) / requestsTotal)
	return float64(utilization) / float64(target), utilization, metricsTotal / int64(n), nil
}

// usageRatio is upstream's GetMetricUsageRatio: the integer average over
// every sample, over the target.
func usageRatio(metrics map[string]podSample, target int64) (ratio float64, average int64) {
	var total int64
	for _, m := range metrics {
		total += m.value
	}
	average = total / int64(len(metrics))
	return float64(average) / float64(target), average
}

// rebalance applies upstream's treatment of missing and unready pods after
// the first ratio: fallbackValue gives a missing pod's value on a
// scale-down. It returns the proposal and the outcome.
func (c *calculator) rebalance(metrics map[string]podSample, g podGroups, current int32, ratio float64,
	fallback func(pod string) int64, recompute func() (float64, error), ex *MetricExplanation) (int32, error) {
	ex.Ratio, ex.RebalancedRatio = ratio, ratio
	scaleUpWithUnready := len(g.unready) > 0 && ratio > 1.0
	if !scaleUpWithUnready && len(g.missing) == 0 {
		if c.tols.within(ratio) {
			ex.Outcome = OutcomeWithinTolerance
			return current, nil
		}
		ex.Outcome = OutcomeScaled
		return ceilInt32(ratio * float64(g.ready)), nil
	}
	if len(g.missing) > 0 {
		if ratio < 1.0 {
			for name := range g.missing {
				metrics[name] = podSample{value: fallback(name)}
			}
		} else if ratio > 1.0 {
			for name := range g.missing {
				metrics[name] = podSample{value: 0}
			}
		}
	}
	if scaleUpWithUnready {
		for name := range g.unready {
			metrics[name] = podSample{value: 0}
		}
	}
	newRatio, err := recompute()
	if err != nil {
		return 0, err
	}
	ex.RebalancedRatio = newRatio
	if c.tols.within(newRatio) || (ratio < 1.0 && newRatio > 1.0) || (ratio > 1.0 && newRatio < 1.0) {
		ex.Outcome = OutcomeRebalanceHeld
		return current, nil
	}
	proposal := ceilInt32(newRatio * float64(len(metrics)))
	if (newRatio < 1.0 && proposal > current) || (newRatio > 1.0 && proposal < current) {
		ex.Outcome = OutcomeRebalanceHeld
		return current, nil
	}
	ex.Outcome = OutcomeRebalanced
	return proposal, nil
}

// countGroups copies the group sizes into the explanation.
func countGroups(ex *MetricExplanation, g podGroups) {
	ex.ReadyPods = int32(g.ready)
	ex.UnreadyPods = int32(len(g.unready))
	ex.MissingPods = int32(len(g.missing))
	ex.IgnoredPods = int32(len(g.ignored))
}

// resourceUtilization is upstream's GetResourceReplicas.
func (c *calculator) resourceUtilization(current, target int32, resource, container, metricErr string, ex *MetricExplanation) (proposal, utilization int32, rawAverage int64, err error) {
	items, err := c.resourceItems(resource, metricErr)
	if err != nil {
		return 0, 0, 0, err
	}
	metrics := resourceSamples(items, resource, container)
	if len(c.in.Pods) == 0 {
		return 0, 0, 0, errors.New("no pods returned by selector while calculating replica count")
	}
	g := c.groupPods(metrics, resource)
	countGroups(ex, g)
	removeGroups(metrics, g)
	if len(metrics) == 0 {
		return 0, 0, 0, errors.New("did not receive metrics for targeted pods (pods might be unready)")
	}
	reqs, err := c.requests(resource, container)
	if err != nil {
		return 0, 0, 0, err
	}
	ratio, utilization, rawAverage, err := utilizationRatio(metrics, reqs, target)
	if err != nil {
		return 0, 0, 0, err
	}
	ex.Current, ex.Target = int64(utilization), int64(target)
	fallbackPercent := int64(max(100, target))
	proposal, err = c.rebalance(metrics, g, current, ratio,
		func(pod string) int64 { return reqs[pod] * fallbackPercent / 100 },
		func() (float64, error) {
			r, _, _, err := utilizationRatio(metrics, reqs, target)
			return r, err
		}, ex)
	if err != nil {
		return 0, 0, 0, err
	}
	return proposal, utilization, rawAverage, nil
}

// resourceItems returns the resource metrics API's items, or upstream's
// error for a failed or empty answer. metricErr is a fetch error reported
// for this metric alone; it counts like a failure of the shared answer.
func (c *calculator) resourceItems(resource, metricErr string) ([]PodUsage, error) {
	rm := &c.in.ResourceMetrics
	if fetchErr := cmp.Or(rm.Err, metricErr); fetchErr != "" {
		return nil, fmt.Errorf("unable to get metrics for resource %s: unable to fetch metrics from resource metrics API: %s", resource, fetchErr)
	}
	if len(rm.Pods) == 0 {
		return nil, fmt.Errorf("unable to get metrics for resource %s: no metrics returned from resource metrics API", resource)
	}
	return rm.Pods, nil
}

// plainReplicas is upstream's calcPlainMetricReplicas, for AverageValue
// resource targets and Pods metrics.
func (c *calculator) plainReplicas(metrics map[string]podSample, current int32, target int64, resource string, ex *MetricExplanation) (int32, int64, error) {
	if len(c.in.Pods) == 0 {
		return 0, 0, errors.New("no pods returned by selector while calculating replica count")
	}
	g := c.groupPods(metrics, resource)
	countGroups(ex, g)
	removeGroups(metrics, g)
	if len(metrics) == 0 {
		return 0, 0, errors.New("did not receive metrics for targeted pods (pods might be unready)")
	}
	ratio, average := usageRatio(metrics, target)
	ex.Current, ex.Target = average, target
	proposal, err := c.rebalance(metrics, g, current, ratio,
		func(string) int64 { return target },
		func() (float64, error) {
			r, _ := usageRatio(metrics, target)
			return r, nil
		}, ex)
	return proposal, average, err
}

// readyPods counts running pods whose Ready condition is True.
func (c *calculator) readyPods() (int64, error) {
	if len(c.in.Pods) == 0 {
		return 0, errors.New("unable to calculate ready pods: no pods returned by selector while calculating replica count")
	}
	var n int64
	for i := range c.in.Pods {
		p := &c.in.Pods[i]
		if p.Phase == PodRunning && p.Ready != nil && p.Ready.Status == ConditionTrue {
			n++
		}
	}
	return n, nil
}

// ratioReplicas is upstream's getUsageRatioReplicaCount for Object and
// External Value targets: from zero replicas the proposal is ceil(ratio)
// without tolerance; otherwise ratio × ready pods, saturated at int32.
func (c *calculator) ratioReplicas(current int32, ratio float64, ex *MetricExplanation) (int32, error) {
	ex.Ratio, ex.RebalancedRatio = ratio, ratio
	if current == 0 {
		ex.Outcome = OutcomeFromZero
		return ceilInt32(ratio), nil
	}
	if c.tols.within(ratio) {
		ex.Outcome = OutcomeWithinTolerance
		return current, nil
	}
	ready, err := c.readyPods()
	if err != nil {
		return 0, err
	}
	ex.ReadyPods = int32(ready)
	ex.Outcome = OutcomeScaled
	f := ratio * float64(ready)
	if f > math.MaxInt32 {
		return math.MaxInt32, nil
	}
	return ceilInt32(f), nil
}

// perPodReplicas computes an AverageValue proposal for Object and External
// metrics from a total over status replicas; it returns the proposal and
// the reported average, ceil(total / statusReplicas). Upstream saturates the
// proposal at the int32 maximum and the average at the int64 maximum for
// External metrics only (saturate); Object metrics convert without bounds.
func (c *calculator) perPodReplicas(total, target int64, saturate bool, ex *MetricExplanation) (int32, int64) {
	statusReplicas := c.in.Scale.StatusReplicas
	proposal := statusReplicas
	ratio := float64(total) / (float64(target) * float64(statusReplicas))
	ex.Ratio, ex.RebalancedRatio = ratio, ratio
	ex.Current, ex.Target = total, target
	ex.Outcome = OutcomeWithinTolerance
	if !c.tols.within(ratio) {
		ex.Outcome = OutcomeScaled
		f := math.Ceil(float64(total) / float64(target))
		if saturate && f > math.MaxInt32 {
			proposal = math.MaxInt32
		} else {
			proposal = toInt32(f)
		}
	}
	if saturate && float64(total) >= math.MaxInt64 {
		return proposal, math.MaxInt64
	}
	return proposal, toInt64(math.Ceil(float64(total) / float64(statusReplicas)))
}

// ceilInt32 is int32(math.Ceil(f)), saturating like toInt32.
func ceilInt32(f float64) int32 { return toInt32(math.Ceil(f)) }

// toInt32 converts f to int32, saturating: values above the range become
// math.MaxInt32, values below it and NaN math.MinInt32. (Go's own
// conversion is platform-defined out of range: upstream's wraps to
// MinInt32 on amd64 and saturates on arm64; Setpoint saturates everywhere.)
func toInt32(f float64) int32 {
	switch {
	case f >= 1<<31:
		return math.MaxInt32
	case f != f || f < -(1<<31):
		return math.MinInt32
	}
	return int32(f)
}

// clampInt32 is n saturated to the int32 range.
func clampInt32(n int64) int32 { return int32(max(math.MinInt32, min(n, math.MaxInt32))) }

// toInt64 converts like Go on amd64: NaN and out-of-range values become
// math.MinInt64.
func toInt64(f float64) int64 {
	if f != f || f >= 1<<63 || f < -(1<<63) {
		return math.MinInt64
	}
	return int64(f)
}
