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
	value int64
	src   int32 // the index of the API's item the value came from
	ok    bool  // the pod has a sample
}

// samples are the values of one pod-based metric: a slot per pod of the
// input at the pod's index, and the values of pods the input does not list
// (upstream keeps those: they count in plain averages and belong to no
// group). The slots hold no pointers, so that filling them costs the
// garbage collector nothing; a sample's timestamp and window are read from
// the API's answer, items or values.
type samples struct {
	byPod  []podSample
	n      int              // slots that hold a sample
	extra  map[string]int64 // by pod name; nil when there are none
	items  []PodUsage       // the resource metrics API's answer, or
	values []MetricValue    // the custom metrics API's answer
}

// when returns the timestamp and window of a sample taken from the API.
func (s *samples) when(v podSample) (time.Time, time.Duration) {
	if s.items != nil {
		m := &s.items[v.src]
		return m.Timestamp, m.Window
	}
	m := &s.values[v.src]
	return m.Timestamp, m.Window
}

// count is the number of samples, listed pods or not.
func (s *samples) count() int { return s.n + len(s.extra) }

// put sets pod i's sample, replacing any earlier one.
func (s *samples) put(i int, v podSample) {
	if !s.byPod[i].ok {
		s.n++
	}
	v.ok = true
	s.byPod[i] = v
}

// drop removes pod i's sample.
func (s *samples) drop(i int) {
	if s.byPod[i].ok {
		s.n--
		s.byPod[i] = podSample{}
	}
}

// podGroup is the group upstream's groupPods puts a pod in.
type podGroup uint8

// The pod groups; a pod is in exactly one.
const (
	groupReady podGroup = iota
	groupUnready
	groupMissing
	groupIgnored
)

// podGroups is how the pods of a target fall into upstream's groups.
type podGroups struct {
	of                               []podGroup // by pod index
	ready, unready, missing, ignored int
}

// metricResult is what evaluating one metric yields.
type metricResult struct {
	proposal int32
	status   MetricStatus
	explain  MetricExplanation
	values   *metricValues // where the status' values are kept
}

// metricValues holds what the pointers of one metric's status point to: a
// status reports at most one quantity and a utilization.
type metricValues struct {
	quantity    Quantity
	utilization int32
}

// quantity sets the metric's quantity and returns a pointer to it.
func (r *metricResult) quantity(milli int64, format QuantityFormat) *Quantity {
	r.values.quantity = Quantity{Milli: milli, Format: format}
	return &r.values.quantity
}

// metricError is a failed metric: its error text and the reason of the
// ScalingActive=False condition upstream would set for it.
type metricError struct {
	reason string
	// err is the error as the controller returns it (the
	// FailedComputeMetricsReplicas text); shown is the error as its
	// condition and FailedGet*Metric Event show it.
	err, shown error
}

// calculator evaluates metrics for one input. Its buffers, one slot per
// pod, serve one metric at a time.
type calculator struct {
	// in and pods are copies of the decider's: pointers to them would
	// move the decider to the heap.
	in     Input
	tols   tolerances
	pods   podIndex // finds the pods of in.Pods by name
	sample []podSample
	group  []podGroup
	req    []int64
	cur    samples // the samples newSamples returned last
}

// newSamples returns an empty samples backed by the calculator's buffer;
// it is valid until the next call.
func (c *calculator) newSamples() *samples {
	if c.sample == nil {
		c.sample = make([]podSample, len(c.in.Pods))
	} else {
		clear(c.sample)
	}
	c.cur = samples{byPod: c.sample}
	return &c.cur
}

// putInOrder records v as the sample of pods[*next], and moves *next on,
// when that pod is named name; it reports whether it did. Metrics APIs
// mostly list pods in the order of the input, so the loops over samples
// try it (inline) before addAway.
func (s *samples) putInOrder(pods []Pod, next *int, name string, v podSample) bool {
	if n := *next; n < len(pods) && pods[n].Name == name {
		s.put(n, v)
		*next = n + 1
		return true
	}
	return false
}

// addAway records a sample of the pod named name, not pod *next, as
// putInOrder does; a later sample of a pod replaces an earlier one.
func (c *calculator) addAway(s *samples, name string, v podSample, next *int) {
	if i := c.podAt(name, next); i >= 0 {
		s.put(i, v)
		return
	}
	if s.extra == nil {
		s.extra = map[string]int64{}
	}
	s.extra[name] = v.value
}

// podAt returns the index of the pod named name in Input.Pods, or -1; it
// tries the pod after *next (pod *next has no sample) before the index.
func (c *calculator) podAt(name string, next *int) int {
	pods := c.in.Pods
	if n := *next + 1; n < len(pods) && pods[n].Name == name {
		*next = n + 1
		return n
	}
	i := c.pods.find(name)
	if i < 0 {
		return -1
	}
	*next = i + 1
	return i
}

// groupPods sorts pods into ready, unready, missing and ignored, exactly as
// upstream's groupPods: readiness only matters for cpu.
func (c *calculator) groupPods(metrics *samples, resource string) podGroups {
	if c.group == nil {
		c.group = make([]podGroup, len(c.in.Pods))
	}
	g := podGroups{of: c.group}
	s := &c.in.Settings
	// A pod started after initializing is still initializing: its start
	// plus the period is after now.
	initializing := c.in.Now.Add(-s.CPUInitializationPeriod)
	cpu := resource == "cpu"
	pods, of, byPod := c.in.Pods, g.of[:len(c.in.Pods)], metrics.byPod[:len(c.in.Pods)]
	for i := range pods {
		grp := groupOf(&pods[i], metrics, &byPod[i], cpu, s, &initializing)
		of[i] = grp
		switch grp {
		case groupReady:
			g.ready++
		case groupUnready:
			g.unready++
		case groupMissing:
			g.missing++
		case groupIgnored:
			g.ignored++
		}
	}
	return g
}

// groupOf is the group of pod, whose sample metric is from metrics; cpu
// says whether the metric is cpu's, and a pod started after initializing
// is in its CPU initialization period.
func groupOf(pod *Pod, metrics *samples, metric *podSample, cpu bool, s *Settings, initializing *time.Time) podGroup {
	if pod.Deleting || pod.Phase == PodFailed {
		return groupIgnored
	}
	if pod.Phase == PodPending {
		return groupUnready
	}
	if !metric.ok {
		return groupMissing
	}
	if !cpu {
		return groupReady
	}
	var unready bool
	ready := pod.Ready
	if ready == nil || pod.StartTime.IsZero() {
		unready = true
	} else if pod.StartTime.After(*initializing) {
		// Still initializing: the sample must be a full window
		// younger than the last readiness transition.
		timestamp, window := metrics.when(*metric)
		unready = ready.Status == ConditionFalse || timestamp.Before(ready.LastTransitionTime.Add(window))
	} else {
		// Unready and never ready since its start.
		unready = ready.Status == ConditionFalse && pod.StartTime.Add(s.InitialReadinessDelay).After(ready.LastTransitionTime)
	}
	if unready {
		return groupUnready
	}
	return groupReady
}

// removeGroups drops the samples of ignored and unready pods.
func removeGroups(metrics *samples, g podGroups) {
	if g.unready+g.ignored == 0 {
		return
	}
	for i, grp := range g.of {
		if grp == groupIgnored || grp == groupUnready {
			metrics.drop(i)
		}
	}
}

// resourceSamples turns the resource metrics API answer into per-pod
// samples of resource: the sum over the pod's containers (a pod missing the
// resource in any container, or without containers, has no sample), or the
// named container's value when container is set.
func (c *calculator) resourceSamples(items []PodUsage, resource, container string) *samples {
	res := c.newSamples()
	res.items = items
	pods, next := c.in.Pods, 0
	for k := range items {
		m := &items[k]
		if container != "" {
			for j := range m.Containers {
				cu := &m.Containers[j]
				if cu.Name != container {
					continue
				}
				if v, ok := cu.Usage.Get(resource); ok {
					if sample := (podSample{value: v, src: int32(k)}); !res.putInOrder(pods, &next, m.Pod, sample) {
						c.addAway(res, m.Pod, sample, &next)
					}
				}
				break
			}
			continue
		}
		var sum int64
		missing := len(m.Containers) == 0
		for j := range m.Containers {
			v, ok := m.Containers[j].Usage.Get(resource)
			if !ok {
				missing = true
				break
			}
			sum += v
		}
		if !missing {
			if sample := (podSample{value: sum, src: int32(k)}); !res.putInOrder(pods, &next, m.Pod, sample) {
				c.addAway(res, m.Pod, sample, &next)
			}
		}
	}
	return res
}

// requests returns each pod's request of resource in milli-units, by pod
// index, as upstream's calculateRequests: with pod-level requests and no
// container named, Kubernetes' pod request aggregate (podRequest);
// otherwise the named container's request or the sum over containers and
// sidecars. Every pod must have the request. In the same pass it sums what
// utilizationRatio divides over metrics' samples. The slice is valid until
// the next call.
func (c *calculator) requests(metrics *samples, resource, container string) ([]int64, sampleTotals, error) {
	if c.req == nil {
		c.req = make([]int64, len(c.in.Pods))
	}
	pods, out, byPod := c.in.Pods, c.req[:len(c.in.Pods)], metrics.byPod[:len(c.in.Pods)]
	var t sampleTotals
	for i := range pods {
		v, err := requestOf(&pods[i], resource, container)
		if err != nil {
			return nil, sampleTotals{}, err
		}
		out[i] = v
		if m := &byPod[i]; m.ok {
			t.add(m.value, v)
		}
	}
	return out, t, nil
}

// requestOf is pod's request of resource, as requests computes it.
func requestOf(pod *Pod, resource, container string) (int64, error) {
	if container == "" && len(pod.Requests) > 0 && podLevelRequestsSet(pod.Requests) {
		v, ok := podRequest(pod, resource)
		if !ok {
			return 0, fmt.Errorf("missing pod-level request for %s in Pod %s", resource, pod.Name)
		}
		return v, nil
	}
	var sum int64
	for j := range pod.Containers {
		ct := &pod.Containers[j]
		if ct.Init || (container != "" && ct.Name != container) {
			continue
		}
		v, ok := ct.Requests.Get(resource)
		if !ok {
			return 0, fmt.Errorf("missing request for %s in container %s of Pod %s", resource, ct.Name, pod.Name)
		}
		if container != "" {
			return v, nil
		}
		sum += v
	}
	if container != "" {
		return 0, fmt.Errorf("container %s not found in Pod %s", container, pod.Name)
	}
	return sum, nil
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
	add := func(dst *int64, reqs ResourceList) int64 {
		v, has := reqs.Get(resource)
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
	if v, has := pod.Requests.Get(resource); has && supportedPodLevel(resource) {
		total, ok = v, true
	}
	add(&total, pod.Overhead)
	return total, ok
}

// podLevelRequestsSet reports whether pod-level requests name a resource
// Kubernetes supports at pod level (cpu, memory, huge pages); only then do
// they take precedence over the containers' requests.
func podLevelRequestsSet(requests ResourceList) bool {
	for i := range requests {
		if supportedPodLevel(requests[i].Name) {
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
// without a request (those of pods the input does not list) are extraneous
// and skipped; the utilization is an integer percent, truncated.
func utilizationRatio(metrics *samples, requests []int64, target int32) (ratio float64, utilization int32, rawAverage int64, err error) {
	var t sampleTotals
	byPod := metrics.byPod
	requests = requests[:len(byPod)]
	for i := range byPod {
		if m := &byPod[i]; m.ok {
			t.add(m.value, requests[i])
		}
	}
	return t.ratio(target)
}

// sampleTotals are the sums of a utilization ratio: of n samples and of
// their pods' requests, wrapping as Kubernetes' int64 sums do.
type sampleTotals struct {
	metrics, requests int64
	n                 int
}

// add counts a sample and its pod's request.
func (t *sampleTotals) add(value, request int64) {
	t.metrics += value
	t.requests += request
	t.n++
}

// ratio is utilizationRatio's answer for the totals.
func (t sampleTotals) ratio(target int32) (ratio float64, utilization int32, rawAverage int64, err error) {
	if t.requests == 0 {
		return 0, 0, 0, errors.New("no metrics returned matched known pods")
	}
	utilization = int32((t.metrics * 100) / t.requests)
	return float64(utilization) / float64(target), utilization, t.metrics / int64(t.n), nil
}

// usageRatio is upstream's GetMetricUsageRatio: the integer average over
// every sample, over the target.
func usageRatio(metrics *samples, target int64) (ratio float64, average int64) {
	var total int64
	for _, m := range metrics.byPod {
		if m.ok {
			total += m.value
		}
	}
	for _, v := range metrics.extra {
		total += v
	}
	average = total / int64(metrics.count())
	return float64(average) / float64(target), average
}

// rebalance applies upstream's treatment of missing and unready pods after
// the first ratio: fallback gives the value of missing pod i on a
// scale-down. It returns the proposal and the outcome.
func (c *calculator) rebalance(metrics *samples, g podGroups, current int32, ratio float64,
	fallback func(i int) int64, recompute func() (float64, error), ex *MetricExplanation) (int32, error) {
	ex.Ratio, ex.RebalancedRatio = ratio, ratio
	scaleUpWithUnready := g.unready > 0 && ratio > 1.0
	if !scaleUpWithUnready && g.missing == 0 {
		if c.tols.within(ratio) {
			ex.Outcome = OutcomeWithinTolerance
			return current, nil
		}
		ex.Outcome = OutcomeScaled
		return ceilInt32(ratio * float64(g.ready)), nil
	}
	for i, grp := range g.of {
		switch {
		case grp == groupMissing && ratio < 1.0:
			metrics.put(i, podSample{value: fallback(i)})
		case grp == groupMissing && ratio > 1.0:
			metrics.put(i, podSample{value: 0})
		case grp == groupUnready && scaleUpWithUnready:
			metrics.put(i, podSample{value: 0})
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
	proposal := ceilInt32(newRatio * float64(metrics.count()))
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
	ex.UnreadyPods = int32(g.unready)
	ex.MissingPods = int32(g.missing)
	ex.IgnoredPods = int32(g.ignored)
}

// resourceUtilization is upstream's GetResourceReplicas.
func (c *calculator) resourceUtilization(current, target int32, resource, container, metricErr string, ex *MetricExplanation) (proposal, utilization int32, rawAverage int64, err error) {
	items, err := c.resourceItems(resource, metricErr)
	if err != nil {
		return 0, 0, 0, err
	}
	metrics := c.resourceSamples(items, resource, container)
	if len(c.in.Pods) == 0 {
		return 0, 0, 0, errors.New("no pods returned by selector while calculating replica count")
	}
	g := c.groupPods(metrics, resource)
	countGroups(ex, g)
	removeGroups(metrics, g)
	if metrics.count() == 0 {
		return 0, 0, 0, errors.New("did not receive metrics for targeted pods (pods might be unready)")
	}
	reqs, totals, err := c.requests(metrics, resource, container)
	if err != nil {
		return 0, 0, 0, err
	}
	ratio, utilization, rawAverage, err := totals.ratio(target)
	if err != nil {
		return 0, 0, 0, err
	}
	ex.Current, ex.Target = int64(utilization), int64(target)
	fallbackPercent := int64(max(100, target))
	proposal, err = c.rebalance(metrics, g, current, ratio,
		func(i int) int64 { return reqs[i] * fallbackPercent / 100 },
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
func (c *calculator) plainReplicas(metrics *samples, current int32, target int64, resource string, ex *MetricExplanation) (int32, int64, error) {
	if len(c.in.Pods) == 0 {
		return 0, 0, errors.New("no pods returned by selector while calculating replica count")
	}
	g := c.groupPods(metrics, resource)
	countGroups(ex, g)
	removeGroups(metrics, g)
	if metrics.count() == 0 {
		return 0, 0, errors.New("did not receive metrics for targeted pods (pods might be unready)")
	}
	ratio, average := usageRatio(metrics, target)
	ex.Current, ex.Target = average, target
	proposal, err := c.rebalance(metrics, g, current, ratio,
		func(int) int64 { return target },
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
