package agent

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	"github.com/setpointhq/setpoint/hpa"
	"github.com/setpointhq/setpoint/hpa/metriclabel"
)

// reconcile brings one autoscaler, named by its queue key (parseKey), in
// line with the service's decision. It is level-based: it reads everything
// it needs afresh.
func (c *Controller) reconcile(ctx context.Context, key string) error {
	k, err := parseKey(key)
	if err != nil {
		c.opts.Prometheus.reconciled(resultError)
		return fmt.Errorf("%w: bad key %q", errTerminal, key)
	}
	target := k.target(c.opts.Cluster)
	obj, exists, err := c.cached(k)
	if err != nil {
		c.opts.Prometheus.reconciled(resultError)
		return err
	}
	if !exists {
		return c.deleted(ctx, k, target)
	}
	start := time.Now()
	now := c.opts.Clock.Now()
	r := &run{c: c, target: target, now: metav1.NewTime(now), key: k, action: metriclabel.ActionNone}
	if k.hpa {
		h, ok := obj.(*autoscalingv2.HorizontalPodAutoscaler)
		if !ok {
			c.opts.Prometheus.reconciled(resultError)
			return fmt.Errorf("%w: unexpected object %T", errTerminal, obj)
		}
		r.hpa, r.obj, r.meta, r.spec = h, h, &h.ObjectMeta, autoscalerSpecOf(h)
		r.prev = autoscalerStatusOf(&h.Status)
	} else {
		a, err := autoscalerOf(obj)
		if err != nil {
			c.opts.Prometheus.reconciled(resultError)
			return fmt.Errorf("%w: %v", errTerminal, err)
		}
		r.a, r.obj, r.meta, r.spec, r.prev = a, a, &a.ObjectMeta, &a.Spec, a.Status
	}
	c.started(key, now)
	r.status = *r.prev.DeepCopy()
	c.opts.Prometheus.present(k.namespace, k.name)
	result, err := r.reconcile(ctx)
	c.opts.Prometheus.reconciled(result)
	c.opts.Prometheus.reconciliation(r.action, r.errorLabel(result), time.Since(start))
	return err
}

// autoscalerOf is the Autoscaler of a cached object: the cache holds
// typed objects (typedAutoscaler), or the dynamic client's form for one
// that did not convert.
func autoscalerOf(obj any) (*v1alpha1.Autoscaler, error) {
	switch o := obj.(type) {
	case *v1alpha1.Autoscaler:
		return o, nil
	case *unstructured.Unstructured:
		return v1alpha1.FromUnstructured(o)
	}
	return nil, fmt.Errorf("unexpected object %T", obj)
}

// started records that key's reconcile started at now and the interval
// since its previous one.
func (c *Controller) started(key string, now time.Time) {
	c.mu.Lock()
	ks := c.keys[key]
	if ks == nil {
		ks = &keyState{}
		c.keys[key] = ks
	}
	prev := ks.started
	ks.started = now
	c.mu.Unlock()
	if !prev.IsZero() {
		c.opts.Prometheus.intervalRatio(float64(now.Sub(prev)) / float64(c.opts.SyncPeriod))
	}
}

// deleted tells the service a deleted autoscaler's history can go.
func (c *Controller) deleted(ctx context.Context, k objectKey, target Target) error {
	c.mu.Lock()
	delete(c.keys, k.String())
	delete(c.selectors, k.String())
	c.mu.Unlock()
	callCtx, cancel := context.WithTimeout(ctx, c.opts.RecommendTimeout)
	defer cancel()
	if err := c.opts.Service.DeleteTarget(callCtx, target); err != nil {
		c.opts.Prometheus.reconciled(resultServiceUnavailable)
		return fmt.Errorf("agent: delete target %s: %w", k, err)
	}
	klog.FromContext(ctx).V(2).Info("agent: target deleted from the service")
	c.opts.Prometheus.reconciled(resultDeleted)
	c.opts.Prometheus.gone(k.namespace, k.name)
	return nil
}

// run is one reconcile of one autoscaler: an Autoscaler or an HPA, read
// through the same fields.
type run struct {
	c *Controller
	// a is the cached Autoscaler, or nil for an HPA; hpa the cached HPA,
	// or nil for an Autoscaler. Both are shared, never modified.
	a   *v1alpha1.Autoscaler
	hpa *autoscalingv2.HorizontalPodAutoscaler
	// obj is the object Events are about; meta its metadata.
	obj  runtime.Object
	meta *metav1.ObjectMeta
	// spec is the autoscaler's spec (an HPA's, as an Autoscaler spec
	// without paused and dryRun); prev its status as read.
	spec   *v1alpha1.AutoscalerSpec
	prev   v1alpha1.AutoscalerStatus
	target Target
	key    objectKey
	now    metav1.Time
	// status is the status being built, from a copy of the current one.
	status v1alpha1.AutoscalerStatus
	// action is the reconcile's action label: the rescale attempted.
	action string
	// failedMetrics is true when the decision carried an error (some
	// metric could not be computed).
	failedMetrics bool
	// decisionID is this reconcile's decision, once made.
	decisionID string
	// standingDown is set when the agent stands down for the HPA.
	standingDown bool
}

// errorLabel is the reconcile's error label for its result, as the HPA
// controller's: a spec the service rejects is spec, any other failure
// (metrics included) internal.
func (r *run) errorLabel(result string) string {
	switch {
	case result == resultInvalid:
		return metriclabel.ErrorSpec
	case result == resultError, result == resultServiceUnavailable, r.failedMetrics:
		return metriclabel.ErrorInternal
	}
	return metriclabel.ErrorNone
}

// event records an Event about the autoscaler through its kind's recorder.
func (r *run) event(eventtype, reason, messageFmt string, args ...any) {
	rec := r.c.opts.Events
	if r.hpa != nil {
		rec = r.c.opts.HPAEvents
	}
	rec.Eventf(r.obj, eventtype, reason, messageFmt, args...)
}

func (r *run) reconcile(ctx context.Context) (string, error) {
	logger := klog.FromContext(ctx)
	spec := r.spec
	if r.hpa != nil {
		if manager, at, ok := otherStatusWriter(r.hpa.ManagedFields, r.now.Time, r.c.opts.StandDownWindow); ok {
			return r.standDown(ctx, manager, at)
		}
		if findCondition(r.status.Conditions, ConditionStandingDown) != nil {
			logger.Info("agent: no other controller wrote this HPA's status lately; serving it")
			r.status.Conditions = removeCondition(r.status.Conditions, ConditionStandingDown)
		}
		r.c.opts.Prometheus.standingDown(r.key.namespace, r.key.name, false)
		if err := setAheadAnnotation(spec, r.hpa.Annotations); err != nil {
			return r.invalidSpec(ctx, err.Error(), err)
		}
	} else {
		// The HPA controller sets observedGeneration only once it read the
		// target's scale; an Autoscaler's says which spec the status is for.
		r.status.ObservedGeneration = r.meta.Generation
		r.status.Reference = reference(spec.ScaleTargetRef)
	}

	if spec.Paused {
		r.status.Conditions = setCondition(r.status.Conditions, v1alpha1.ConditionPaused, corev1.ConditionTrue, v1alpha1.ReasonPaused,
			"spec.paused is set: no decisions and no changes to the target", r.now)
		return resultPaused, r.writeStatus(ctx)
	}
	r.status.Conditions = removeCondition(r.status.Conditions, v1alpha1.ConditionPaused)
	if spec.Fleet != nil {
		return r.reconcileFleet(ctx)
	}
	r.notInFleet()

	sc, gr, err := r.c.scaleFor(ctx, r.meta.Namespace, spec.ScaleTargetRef)
	if err != nil {
		r.event(corev1.EventTypeWarning, "FailedGetScale", "%s", err.Error())
		r.status.Conditions = setCondition(r.status.Conditions, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedGetScale",
			fmt.Sprintf("the HPA controller was unable to get the target's current scale: %v", err), r.now)
		if serr := r.writeStatus(ctx); serr != nil {
			logger.Error(serr, "agent: update status")
		}
		return resultError, fmt.Errorf("agent: get scale of %s: %w", reference(spec.ScaleTargetRef), err)
	}
	r.status.Conditions = setCondition(r.status.Conditions, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededGetScale",
		"the HPA controller was able to get the target's current scale", r.now)
	r.status.ObservedGeneration = r.meta.Generation
	current := sc.Spec.Replicas
	r.status.CurrentReplicas = current
	r.observeExternal(ctx, current)

	// The selector is checked, and the autoscaler's pods compared with the
	// others', only when the HPA controller would compute metrics.
	selector, pods, ambiguous, err := r.podsOf(sc, computesMetrics(spec, &r.prev, current))
	if err != nil {
		return resultError, err
	}
	if ambiguous != "" {
		return r.ambiguousSelector(ctx, ambiguous)
	}
	rm, values, took := r.c.opts.Metrics.fetchMetrics(ctx, r.meta.Namespace, spec, selector)

	req := &Request{
		Target:          r.target,
		Generation:      r.meta.Generation,
		Spec:            *spec.DeepCopy(),
		Settings:        r.c.opts.Settings,
		Scale:           scaleOf(sc),
		Pods:            pods,
		ResourceMetrics: rm,
		Metrics:         values,
		Now:             r.now.Time,
		PodStartup:      measureStartup(pods),
	}
	rec, err := r.recommend(ctx, req)
	if err != nil {
		return r.serviceFailed(ctx, err)
	}
	r.decisionID = rec.DecisionID
	r.status.Conditions = setCondition(r.status.Conditions, v1alpha1.ConditionServiceAvailable, corev1.ConditionTrue, v1alpha1.ReasonServiceAvailable,
		"the Setpoint service answered the last request", r.now)
	if rec.Error != "" {
		r.failedMetrics = true
	}
	// The metrics in force: the API server's default (80% cpu) when the
	// spec lists none, as the request carried.
	metrics := spec.Metrics
	if len(metrics) == 0 {
		metrics = []autoscalingv2.MetricSpec{hpa.DefaultMetric()}
	}
	r.c.opts.Prometheus.decided(r.meta.Namespace, r.meta.Name, metrics, current, rec, took)
	r.metricEvents(rec, metrics)
	if !spec.DryRun {
		r.action = metriclabel.ActionOf(rec.Rescale, rec.DesiredReplicas, current)
	}

	r.status.DesiredReplicas = rec.DesiredReplicas
	r.status.CurrentMetrics = rec.CurrentMetrics
	r.status.Conditions = mergeConditions(r.status.Conditions, rec.Conditions, r.now)
	r.fallbackEvents()
	if r.hpa == nil {
		r.status.Explanation = explanationOf(rec, spec.DryRun, current)
		r.status.Targets = formatTargets(metrics, rec.CurrentMetrics)
	}

	switch {
	case !rec.Rescale || rec.DesiredReplicas == current:
	case spec.DryRun:
		r.c.opts.Prometheus.rescaled("dry_run")
		r.event(corev1.EventTypeNormal, "DryRunRescale", "New size would be %d (dry run); reason: %s", rec.DesiredReplicas, rec.Reason)
		// The decision assumed the rescale happens; it does not.
		r.status.Conditions = setCondition(r.status.Conditions, autoscalingv2.AbleToScale, corev1.ConditionFalse, "DryRun",
			fmt.Sprintf("dryRun is set: would scale from %d to %d", current, rec.DesiredReplicas), r.now)
	default:
		if err := r.c.updateScale(ctx, r.meta.Namespace, gr, sc, rec.DesiredReplicas); err != nil {
			r.c.opts.Prometheus.rescaled("failed")
			r.event(corev1.EventTypeWarning, "FailedRescale", "New size: %d; reason: %s; error: %v", rec.DesiredReplicas, rec.Reason, err)
			r.status.Conditions = setCondition(r.status.Conditions, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedUpdateScale",
				fmt.Sprintf("the HPA controller was unable to update the target scale: %v", err), r.now)
			r.status.DesiredReplicas = r.prev.DesiredReplicas
			r.observe(ctx, &Observation{Target: r.target, DecisionID: rec.DecisionID, Kind: ObservedFailed, From: current, To: rec.DesiredReplicas, Err: err.Error(), At: r.c.opts.Clock.Now()})
			if serr := r.writeStatus(ctx); serr != nil {
				logger.Error(serr, "agent: update status")
			}
			return resultError, fmt.Errorf("agent: rescale %s to %d: %w", reference(spec.ScaleTargetRef), rec.DesiredReplicas, err)
		}
		r.c.opts.Prometheus.rescaled("applied")
		r.status.LastScaleTime = &r.now
		if rec.LastScaleTime != nil {
			r.status.LastScaleTime = rec.LastScaleTime.DeepCopy()
		}
		r.event(corev1.EventTypeNormal, "SuccessfulRescale", "New size: %d; reason: %s", rec.DesiredReplicas, rec.Reason)
		logger.Info("agent: rescaled", "target", reference(spec.ScaleTargetRef), "from", current, "to", rec.DesiredReplicas, "reason", rec.Reason)
		r.observe(ctx, &Observation{Target: r.target, DecisionID: rec.DecisionID, Kind: ObservedApplied, From: current, To: rec.DesiredReplicas, At: r.c.opts.Clock.Now()})
	}
	if err := r.writeStatus(ctx); err != nil {
		return resultError, err
	}
	return resultSuccess, nil
}

// podsOf reads the pods the Scale's selector matches, sorted by name, as
// the HPA controller reads them. check says whether the controller would
// compute metrics (computesMetrics): only then does a missing or invalid
// selector get its Event, and are the pods compared with the other
// autoscalers' — ambiguous is then the AmbiguousSelector message when
// another autoscaler selects some of them. A selector that is missing or
// does not parse selects nothing.
func (r *run) podsOf(sc *autoscalingv1.Scale, check bool) (selector labels.Selector, pods []*corev1.Pod, ambiguous string, err error) {
	selector, err = labels.Parse(sc.Status.Selector)
	switch {
	case sc.Status.Selector == "":
		selector = labels.Nothing()
		if check {
			r.event(corev1.EventTypeWarning, "SelectorRequired", "%s", "selector is required")
		}
		return selector, nil, "", nil
	case err != nil:
		selector = labels.Nothing()
		if check {
			r.event(corev1.EventTypeWarning, "InvalidSelector", "couldn't convert selector into a corresponding internal selector object: %v", err)
		}
		return selector, nil, "", nil
	}
	pods, err = r.c.podsFor(r.meta.Namespace, selector)
	if err != nil {
		return selector, nil, "", fmt.Errorf("agent: list pods: %w", err)
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	if check {
		if msg, found := r.c.ambiguous(r.key, sc.Status.Selector, selector, pods); found {
			ambiguous = msg
		}
	}
	return selector, pods, ambiguous, nil
}

// scaleOf is what a request carries of a Scale subresource.
func scaleOf(sc *autoscalingv1.Scale) Scale {
	return Scale{Replicas: sc.Spec.Replicas, StatusReplicas: sc.Status.Replicas, Selector: sc.Status.Selector}
}

// fallbackEvents records an Event when the decision's FallbackActive
// condition turns True (a Warning, with the condition's message) and one
// when it stops being True.
func (r *run) fallbackEvents() {
	was := findCondition(r.prev.Conditions, v1alpha1.ConditionFallbackActive)
	is := findCondition(r.status.Conditions, v1alpha1.ConditionFallbackActive)
	wasActive := was != nil && was.Status == corev1.ConditionTrue
	isActive := is != nil && is.Status == corev1.ConditionTrue
	switch {
	case isActive && !wasActive:
		r.event(corev1.EventTypeWarning, v1alpha1.ReasonFallbackActive, "%s", is.Message)
	case wasActive && !isActive:
		msg := "the fallback no longer applies"
		if is != nil {
			msg = is.Message
		}
		r.event(corev1.EventTypeNormal, v1alpha1.ReasonFallbackEnded, "%s", msg)
	}
}

// computeFailedPrefix starts a decision's error when no replica count
// could be computed at all; the controller's Event carries the rest.
const computeFailedPrefix = "failed to compute desired number of replicas based on listed metrics: "

// metricEvents emits the Events the HPA controller emits while computing
// the metrics: FailedGet<Type>Metric for each metric that failed, with its
// message, and FailedComputeMetricsReplicas only when the computation as a
// whole failed. metrics are the metrics in force, index-aligned with
// rec.Metrics.
func (r *run) metricEvents(rec *Recommendation, metrics []autoscalingv2.MetricSpec) {
	for i, m := range rec.Metrics {
		if !m.Failed || i >= len(metrics) {
			continue
		}
		reason := "InvalidMetricSourceType"
		switch metrics[i].Type {
		case autoscalingv2.ResourceMetricSourceType:
			reason = "FailedGetResourceMetric"
		case autoscalingv2.ContainerResourceMetricSourceType:
			reason = "FailedGetContainerResourceMetric"
		case autoscalingv2.PodsMetricSourceType:
			reason = "FailedGetPodsMetric"
		case autoscalingv2.ObjectMetricSourceType:
			reason = "FailedGetObjectMetric"
		case autoscalingv2.ExternalMetricSourceType:
			reason = "FailedGetExternalMetric"
		}
		r.event(corev1.EventTypeWarning, reason, "%s", m.Err)
	}
	if msg, whole := strings.CutPrefix(rec.Error, computeFailedPrefix); whole {
		r.event(corev1.EventTypeWarning, "FailedComputeMetricsReplicas", "%s", msg)
	}
}

// computesMetrics reports whether the HPA controller computes the metrics
// of an autoscaler with this spec and status at current replicas, and so
// validates its selector and compares its pods with other autoscalers':
// not when the replica count is outside [min, max] (it goes to the limit
// at once), nor at zero replicas unless the autoscaler scaled to zero
// itself (ScaledToZero=True) and can scale back from zero.
func computesMetrics(spec *v1alpha1.AutoscalerSpec, st *v1alpha1.AutoscalerStatus, current int32) bool {
	minReplicas := ptr.Deref(spec.MinReplicas, hpa.DefaultMinReplicas)
	switch {
	case current == 0:
		c := findCondition(st.Conditions, autoscalingv2.ScaledToZero)
		scaledToZero := c != nil && c.Status == corev1.ConditionTrue
		objectOrExternal := false
		for _, m := range spec.Metrics {
			if m.Type == autoscalingv2.ObjectMetricSourceType || m.Type == autoscalingv2.ExternalMetricSourceType {
				objectOrExternal = true
			}
		}
		return scaledToZero && (minReplicas != 0 || objectOrExternal)
	case current > spec.MaxReplicas, current < minReplicas:
		return false
	}
	return true
}

// ambiguousSelector refuses to decide for an Autoscaler whose pods another
// autoscaler also selects, as the HPA controller does: ScalingActive=False
// with reason AmbiguousSelector, no current metrics, and two Warning Events.
func (r *run) ambiguousSelector(ctx context.Context, msg string) (string, error) {
	r.event(corev1.EventTypeWarning, "AmbiguousSelector", "%s", msg)
	r.status.Conditions = setCondition(r.status.Conditions, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededGetScale",
		"the HPA controller was able to get the target's current scale", r.now)
	r.status.Conditions = setCondition(r.status.Conditions, autoscalingv2.ScalingActive, corev1.ConditionFalse, "AmbiguousSelector", msg, r.now)
	r.status.CurrentMetrics = nil
	if r.hpa == nil {
		r.status.Targets = formatTargets(r.spec.Metrics, nil)
	}
	if err := r.writeStatus(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "agent: update status")
	}
	r.event(corev1.EventTypeWarning, "FailedComputeMetricsReplicas", "%s", msg)
	r.failedMetrics = true
	return resultError, fmt.Errorf("%w: %s", errTerminal, msg)
}

// ambiguous records k's pod selector and reports whether any of pods is
// also selected by another autoscaler of the namespace that the agent
// serves — Autoscalers and HPAs alike — with the HPA controller's message:
// "pods by selector <selector> are controlled by more than one HPA (e.g.
// [<ns>/<name> <ns>/<name>])". Like the controller it names at most two
// autoscalers, and only those reconciled at least once.
func (c *Controller) ambiguous(k objectKey, selectorText string, selector labels.Selector, pods []*corev1.Pod) (string, bool) {
	c.mu.Lock()
	c.selectors[k.String()] = selector
	var others []string
	for key, sel := range c.selectors {
		o, err := parseKey(key)
		if err != nil || o.namespace != k.namespace {
			continue
		}
		for _, p := range pods {
			if sel.Matches(labels.Set(p.Labels)) {
				others = append(others, o.namespace+"/"+o.name)
				break
			}
		}
	}
	c.mu.Unlock()
	if len(others) < 2 {
		return "", false
	}
	sort.Strings(others)
	others = others[:2]
	return fmt.Sprintf("pods by selector %v are controlled by more than one HPA (e.g. [%s])", selectorText, strings.Join(others, " ")), true
}

// observeExternal reports a change of spec.replicas made by someone else
// since the last reconcile: current differs from what the last reconcile
// left the target at, as the autoscaler's status records it (leftAt).
func (r *run) observeExternal(ctx context.Context, current int32) {
	if last, known := leftAt(&r.prev); known && last != current {
		r.observe(ctx, &Observation{Target: r.target, Kind: ObservedExternal, From: last, To: current, At: r.c.opts.Clock.Now()})
	}
}

// leftAt is the target's replica count as the reconcile that wrote status
// s left it, read from the status alone (so it survives a leader
// failover): the desired count after a rescale (AbleToScale reason
// SucceededRescale), the current count otherwise. It is unknown before the
// first reconcile that read the target's scale.
func leftAt(s *v1alpha1.AutoscalerStatus) (int32, bool) {
	able := findCondition(s.Conditions, autoscalingv2.AbleToScale)
	switch {
	case able == nil, able.Reason == "FailedGetScale":
		return 0, false
	case able.Reason == "SucceededRescale":
		return s.DesiredReplicas, true
	}
	return s.CurrentReplicas, true
}

// observe sends an observation; a failure is logged, not retried: the
// service learns the replica count again from the next request.
func (r *run) observe(ctx context.Context, obs *Observation) {
	callCtx, cancel := context.WithTimeout(ctx, r.c.opts.RecommendTimeout)
	defer cancel()
	if err := r.c.opts.Service.Observe(callCtx, obs); err != nil {
		klog.FromContext(ctx).Error(err, "agent: observe", "kind", obs.Kind, "from", obs.From, "to", obs.To)
	}
}

func (r *run) recommend(ctx context.Context, req *Request) (*Recommendation, error) {
	callCtx, cancel := context.WithTimeout(ctx, r.c.opts.RecommendTimeout)
	defer cancel()
	start := time.Now()
	rec, err := r.c.opts.Service.Recommend(callCtx, req)
	r.c.opts.Prometheus.recommended(status.Code(err).String(), time.Since(start))
	if err == nil && rec == nil {
		err = status.Error(codes.Internal, "agent: service returned no recommendation")
	}
	return rec, err
}

// serviceFailed records a failed Recommend call and says whether to retry.
// Nothing is changed on the target.
func (r *run) serviceFailed(ctx context.Context, err error) (string, error) {
	logger := klog.FromContext(ctx)
	code := status.Code(err)
	msg := status.Convert(err).Message()
	switch code {
	case codes.InvalidArgument:
		text := invalidArgumentText(err)
		r.status.Conditions = setCondition(r.status.Conditions, v1alpha1.ConditionServiceAvailable, corev1.ConditionFalse, v1alpha1.ReasonInvalidSpec,
			"the Setpoint service rejected the request: "+text, r.now)
		return r.invalidSpec(ctx, "the Setpoint service rejected the request: "+text, fmt.Errorf("recommend: %v", err))
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.ResourceExhausted, codes.Aborted:
		if ctx.Err() != nil {
			return resultError, ctx.Err()
		}
		text := fmt.Sprintf("the Setpoint service did not answer (%s): %s; the target is left unchanged", code, msg)
		r.status.Conditions = setCondition(r.status.Conditions, v1alpha1.ConditionServiceAvailable, corev1.ConditionFalse, v1alpha1.ReasonServiceUnavailable, text, r.now)
		r.event(corev1.EventTypeWarning, v1alpha1.ReasonServiceUnavailable, "%s", text)
		if serr := r.writeStatus(ctx); serr != nil {
			logger.Error(serr, "agent: update status")
		}
		return resultServiceUnavailable, fmt.Errorf("agent: recommend: %w", err)
	default:
		text := fmt.Sprintf("the Setpoint service failed (%s): %s; the target is left unchanged", code, msg)
		r.status.Conditions = setCondition(r.status.Conditions, v1alpha1.ConditionServiceAvailable, corev1.ConditionFalse, v1alpha1.ReasonServiceError, text, r.now)
		r.event(corev1.EventTypeWarning, v1alpha1.ReasonServiceError, "%s", text)
		if serr := r.writeStatus(ctx); serr != nil {
			logger.Error(serr, "agent: update status")
		}
		return resultError, fmt.Errorf("agent: recommend: %w", err)
	}
}

// invalidSpec records a spec that cannot be decided on (ScalingActive=False
// with ReasonInvalidSpec and a Warning Event, both saying text) and
// returns a terminal error: retrying the same spec gives the same answer,
// so the next try waits for the next sync period or a spec change.
func (r *run) invalidSpec(ctx context.Context, text string, err error) (string, error) {
	r.status.Conditions = setCondition(r.status.Conditions, autoscalingv2.ScalingActive, corev1.ConditionFalse, v1alpha1.ReasonInvalidSpec, text, r.now)
	r.event(corev1.EventTypeWarning, v1alpha1.ReasonInvalidSpec, "%s", text)
	if serr := r.writeStatus(ctx); serr != nil {
		klog.FromContext(ctx).Error(serr, "agent: update status")
		return resultInvalid, serr
	}
	return resultInvalid, fmt.Errorf("%w: %v", errTerminal, err)
}

// invalidArgumentText is the field violations of an InvalidArgument status
// (google.rpc.BadRequest details), or its message when it has none.
func invalidArgumentText(err error) string {
	st := status.Convert(err)
	var parts []string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				parts = append(parts, v.GetField()+": "+v.GetDescription())
			}
		}
	}
	if len(parts) == 0 {
		return st.Message()
	}
	return strings.Join(parts, "; ")
}

// explanationOf shortens a recommendation's explanation for the status.
func explanationOf(rec *Recommendation, dryRun bool, current int32) *v1alpha1.Explanation {
	e := rec.Explanation
	e.Steps = append([]v1alpha1.ExplanationStep(nil), e.Steps...)
	if e.Summary == "" {
		e.Summary = fmt.Sprintf("%d → %d", current, rec.DesiredReplicas)
	}
	if dryRun && rec.Rescale && rec.DesiredReplicas != current {
		e.Summary = "dry run, not applied: " + e.Summary
	}
	return &e
}

// writeStatus writes r.status when it differs from the object's at the
// API's precision (times in whole seconds), retrying on conflict with a
// fresh read. An unchanged status costs no request.
func (r *run) writeStatus(ctx context.Context) error {
	atAPIPrecision(&r.status)
	if r.hpa != nil {
		return r.writeHPAStatus(ctx)
	}
	if equality.Semantic.DeepEqual(r.a.Status, r.status) {
		return nil
	}
	client := r.c.opts.Dynamic.Resource(v1alpha1.AutoscalerResource).Namespace(r.a.Namespace)
	st, err := toUnstructuredStatus(&r.status)
	if err != nil {
		return err
	}
	obj, err := v1alpha1.ToUnstructured(&v1alpha1.Autoscaler{TypeMeta: r.a.TypeMeta, ObjectMeta: r.a.ObjectMeta, Spec: r.a.Spec})
	if err != nil {
		return err
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := unstructured.SetNestedField(obj.Object, st, "status"); err != nil {
			return err
		}
		_, err := client.UpdateStatus(ctx, obj, metav1.UpdateOptions{FieldManager: FieldManager})
		if apierrors.IsConflict(err) {
			fresh, gerr := client.Get(ctx, r.a.Name, metav1.GetOptions{})
			if gerr != nil {
				return gerr
			}
			obj = fresh
		}
		return err
	})
	if err != nil {
		if !apierrors.IsNotFound(err) && ctx.Err() == nil {
			r.event(corev1.EventTypeWarning, "FailedUpdateStatus", "%s", err.Error())
		}
		return fmt.Errorf("agent: update status: %w", err)
	}
	return nil
}

// FieldManager names the agent in the managed fields of what it writes:
// an autoscaler's status, an HPA's annotations and the target's scale.
const FieldManager = "setpoint-agent"

// atAPIPrecision rounds the times of s as the API server stores them
// (RFC 3339, whole seconds), so a status equal to the stored one compares
// equal.
func atAPIPrecision(s *v1alpha1.AutoscalerStatus) {
	for i := range s.Conditions {
		s.Conditions[i].LastTransitionTime = s.Conditions[i].LastTransitionTime.Rfc3339Copy()
	}
	if s.LastScaleTime != nil {
		t := s.LastScaleTime.Rfc3339Copy()
		s.LastScaleTime = &t
	}
}

func toUnstructuredStatus(s *v1alpha1.AutoscalerStatus) (map[string]any, error) {
	a := &v1alpha1.Autoscaler{Status: *s}
	m, err := v1alpha1.ToUnstructured(a)
	if err != nil {
		return nil, err
	}
	st, _, err := unstructured.NestedMap(m.Object, "status")
	return st, err
}

// scaleFor reads the Scale subresource of a target, trying each resource
// its kind maps to. Its errors are the HPA controller's, unwrapped: the
// FailedGetScale Event carries them as they are.
func (c *Controller) scaleFor(ctx context.Context, namespace string, ref autoscalingv2.CrossVersionObjectReference) (*autoscalingv1.Scale, schema.GroupResource, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, schema.GroupResource{}, err
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
	mappings, err := c.opts.Mapper.RESTMappings(gk)
	if err != nil {
		if rm, ok := c.opts.Mapper.(meta.ResettableRESTMapper); ok && meta.IsNoMatchError(err) {
			rm.Reset()
		}
		return nil, schema.GroupResource{}, err
	}
	var firstErr error
	for _, m := range mappings {
		gr := m.Resource.GroupResource()
		sc, err := c.opts.Scales.Scales(namespace).Get(ctx, gr, ref.Name, metav1.GetOptions{})
		if err == nil {
			return sc, gr, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = errors.New("unrecognized resource")
	}
	return nil, schema.GroupResource{}, firstErr
}

// errConcurrentRescale is returned when the target's replica count changed
// between the read the decision was based on and the update.
var errConcurrentRescale = errors.New("agent: the target was rescaled concurrently")

// updateScale sets the target's replica count. On a conflict it re-reads
// the Scale and tries again, unless the replica count itself changed: the
// decision was made for the old count.
func (c *Controller) updateScale(ctx context.Context, namespace string, gr schema.GroupResource, read *autoscalingv1.Scale, replicas int32) error {
	sc := read.DeepCopy()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sc.Spec.Replicas = replicas
		_, err := c.opts.Scales.Scales(namespace).Update(ctx, gr, sc, metav1.UpdateOptions{FieldManager: FieldManager})
		if !apierrors.IsConflict(err) {
			return err
		}
		fresh, gerr := c.opts.Scales.Scales(namespace).Get(ctx, gr, read.Name, metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		if fresh.Spec.Replicas != read.Spec.Replicas {
			return fmt.Errorf("%w: from %d to %d", errConcurrentRescale, read.Spec.Replicas, fresh.Spec.Replicas)
		}
		sc = fresh
		return err
	})
}
