package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
)

// Serve says which kinds of autoscaler an agent serves.
type Serve string

// The kinds an agent serves (the values of setpoint-agent -serve).
const (
	// ServeAutoscalers serves setpoint.dev/v1alpha1 Autoscalers only.
	ServeAutoscalers Serve = "autoscalers"
	// ServeHPAs serves autoscaling/v2 HorizontalPodAutoscalers only, in
	// place of kube-controller-manager's HPA controller.
	ServeHPAs Serve = "hpas"
	// ServeBoth serves both kinds.
	ServeBoth Serve = "both"
)

// ParseServe returns the Serve named s ("autoscalers", "hpas" or "both").
func ParseServe(s string) (Serve, error) {
	switch v := Serve(s); v {
	case ServeAutoscalers, ServeHPAs, ServeBoth:
		return v, nil
	}
	return "", fmt.Errorf("agent: serve %q: must be %s, %s or %s", s, ServeAutoscalers, ServeHPAs, ServeBoth)
}

// Autoscalers reports whether s serves Autoscalers.
func (s Serve) Autoscalers() bool { return s == ServeAutoscalers || s == ServeBoth || s == "" }

// HPAs reports whether s serves HorizontalPodAutoscalers.
func (s Serve) HPAs() bool { return s == ServeHPAs || s == ServeBoth }

// Annotations the agent writes on the HorizontalPodAutoscalers it serves,
// its only mark on them: the status and Events are the HPA controller's.
const (
	// DecisionAnnotation holds the id of the Setpoint decision behind the
	// HPA's status: written with each status change.
	DecisionAnnotation = "setpoint.dev/decision"
	// ExplanationAnnotation says where that decision is explained: the
	// web console's page of the target when Options.ConsoleURL is set,
	// otherwise the setpointctl command that prints it.
	ExplanationAnnotation = "setpoint.dev/explanation"
)

// The condition and reason the agent sets on an HPA it stands down for.
const (
	// ConditionStandingDown is True on an HPA whose status another
	// controller wrote within Options.StandDownWindow: the agent neither
	// decides nor scales for it. It is absent while the agent serves it.
	ConditionStandingDown autoscalingv2.HorizontalPodAutoscalerConditionType = "SetpointStandingDown"
	// ReasonAnotherController is its reason, and the reason of the Warning
	// Event that says so.
	ReasonAnotherController = "AnotherController"
)

// hpaKeyPrefix marks the queue keys of HorizontalPodAutoscalers; an
// Autoscaler's key is namespace/name, as cache.MetaNamespaceKeyFunc gives.
// A Kubernetes namespace cannot contain ':'.
const hpaKeyPrefix = "hpa:"

// hpaServiceNamePrefix starts an HPA's name in the service's target key,
// so an HPA and an Autoscaler of the same name keep separate histories.
const hpaServiceNamePrefix = "hpa:"

// objectKey is a parsed queue key.
type objectKey struct {
	hpa             bool
	namespace, name string
}

// parseKey parses a queue key: "namespace/name" for an Autoscaler,
// "hpa:namespace/name" for an HPA.
func parseKey(key string) (objectKey, error) {
	rest, hpa := strings.CutPrefix(key, hpaKeyPrefix)
	ns, name, err := cache.SplitMetaNamespaceKey(rest)
	if err != nil {
		return objectKey{}, err
	}
	return objectKey{hpa: hpa, namespace: ns, name: name}, nil
}

// String is the queue key.
func (k objectKey) String() string {
	if k.hpa {
		return hpaKeyPrefix + k.namespace + "/" + k.name
	}
	return k.namespace + "/" + k.name
}

// target is the object's key in the service.
func (k objectKey) target(cluster string) Target {
	name := k.name
	if k.hpa {
		name = hpaServiceNamePrefix + name
	}
	return Target{Cluster: cluster, Namespace: k.namespace, Name: name}
}

func (c *Controller) enqueueHPA(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	c.queue.Add(hpaKeyPrefix + key)
}

// trimHPA is the HPA cache's transform: it keeps the object but only the
// manager, operation, subresource and time of each managed fields entry
// (fight detection reads them), not the field sets.
func trimHPA(obj any) (any, error) {
	h, ok := obj.(*autoscalingv2.HorizontalPodAutoscaler)
	if !ok {
		return obj, nil
	}
	for i := range h.ManagedFields {
		h.ManagedFields[i].FieldsV1 = nil
	}
	return h, nil
}

// autoscalerSpecOf is an HPA's spec as the pipeline reads it: an
// Autoscaler spec without paused or dryRun.
func autoscalerSpecOf(h *autoscalingv2.HorizontalPodAutoscaler) *v1alpha1.AutoscalerSpec {
	return &v1alpha1.AutoscalerSpec{
		ScaleTargetRef: h.Spec.ScaleTargetRef,
		MinReplicas:    h.Spec.MinReplicas,
		MaxReplicas:    h.Spec.MaxReplicas,
		Metrics:        h.Spec.Metrics,
		Behavior:       h.Spec.Behavior,
	}
}

// autoscalerStatusOf is an HPA's status as the pipeline builds it.
func autoscalerStatusOf(s *autoscalingv2.HorizontalPodAutoscalerStatus) v1alpha1.AutoscalerStatus {
	out := v1alpha1.AutoscalerStatus{
		LastScaleTime:   s.LastScaleTime.DeepCopy(),
		CurrentReplicas: s.CurrentReplicas,
		DesiredReplicas: s.DesiredReplicas,
		CurrentMetrics:  append([]autoscalingv2.MetricStatus(nil), s.CurrentMetrics...),
		Conditions:      append([]autoscalingv2.HorizontalPodAutoscalerCondition(nil), s.Conditions...),
	}
	if s.ObservedGeneration != nil {
		out.ObservedGeneration = *s.ObservedGeneration
	}
	for i := range out.CurrentMetrics {
		out.CurrentMetrics[i] = *out.CurrentMetrics[i].DeepCopy()
	}
	return out
}

// hpaStatusOf is the HPA status the pipeline's status stands for: the
// fields the HPA controller writes, with only the HPA's conditions and,
// when the service failed, the agent's ServiceAvailable=False, which says
// why the HPA is not served.
func hpaStatusOf(s *v1alpha1.AutoscalerStatus) autoscalingv2.HorizontalPodAutoscalerStatus {
	out := autoscalingv2.HorizontalPodAutoscalerStatus{
		LastScaleTime:   s.LastScaleTime,
		CurrentReplicas: s.CurrentReplicas,
		DesiredReplicas: s.DesiredReplicas,
		CurrentMetrics:  s.CurrentMetrics,
	}
	if s.ObservedGeneration != 0 {
		g := s.ObservedGeneration
		out.ObservedGeneration = &g
	}
	for _, c := range s.Conditions {
		switch {
		case c.Type == v1alpha1.ConditionPaused:
		case c.Type == v1alpha1.ConditionServiceAvailable && c.Status == corev1.ConditionTrue:
		default:
			out.Conditions = append(out.Conditions, c)
		}
	}
	return out
}

// otherStatusWriter reports the field manager other than the agent that
// last wrote the status of an object with these managed fields, and
// when, if that was within window before now. The API server stamps an
// entry's time whenever its manager changes a field, to the second.
func otherStatusWriter(fields []metav1.ManagedFieldsEntry, now time.Time, window time.Duration) (string, time.Time, bool) {
	var (
		manager string
		at      time.Time
	)
	for _, f := range fields {
		if f.Subresource != "status" || f.Manager == FieldManager || f.Time == nil {
			continue
		}
		if f.Time.After(at) {
			manager, at = f.Manager, f.Time.Time
		}
	}
	// A second of slack: entry times are truncated to whole seconds.
	if manager == "" || now.Sub(at) >= window+time.Second {
		return "", time.Time{}, false
	}
	return manager, at, true
}

// standDown leaves an HPA whose status another controller writes to that
// controller: no decision, no scale; the condition ConditionStandingDown,
// a Warning Event when the agent starts standing down, and the
// setpoint_agent_standing_down series say so.
func (r *run) standDown(ctx context.Context, manager string, at time.Time) (string, error) {
	// The message names no time, so it stays the same while the other
	// controller goes on writing: the condition is written once.
	msg := fmt.Sprintf("the status of this HorizontalPodAutoscaler is written by %q: another HPA controller serves it, so Setpoint stands down; "+
		"turn off kube-controller-manager's HPA controller (--controllers=*,-horizontalpodautoscaling) to let Setpoint serve it", manager)
	r.c.opts.Prometheus.standingDown(r.key.namespace, r.key.name, true)
	r.standingDown = true
	r.status.Conditions = setCondition(r.status.Conditions, ConditionStandingDown, corev1.ConditionTrue, ReasonAnotherController, msg, r.now)
	if err := r.writeStatus(ctx); err != nil {
		return resultError, err
	}
	// The Event follows the condition: whoever sees it finds the
	// condition written.
	if findCondition(r.prev.Conditions, ConditionStandingDown) == nil {
		r.event(corev1.EventTypeWarning, ReasonAnotherController, "%s", msg)
		klog.FromContext(ctx).Info("agent: another controller writes this HPA's status; standing down", "manager", manager, "at", at)
	}
	return resultStoodDown, nil
}

// writeHPAStatus writes the HPA status r.status stands for when it differs
// from the object's, retrying on conflict with a fresh read, then the
// decision annotations when the status was written. Standing down, a
// conflict means the other controller wrote meanwhile: the retry sets the
// condition on its status rather than writing over it.
func (r *run) writeHPAStatus(ctx context.Context) error {
	st := hpaStatusOf(&r.status)
	if equality.Semantic.DeepEqual(r.hpa.Status, st) {
		return r.annotate(ctx, false)
	}
	client := r.c.opts.Kube.AutoscalingV2().HorizontalPodAutoscalers(r.key.namespace)
	h := r.hpa.DeepCopy()
	// The cache's managed fields lack their field sets (trimHPA): sent
	// back, they would replace the stored ones. Without any, the API
	// server keeps what it has.
	h.ManagedFields = nil
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		h.Status = st
		_, err := client.UpdateStatus(ctx, h, metav1.UpdateOptions{FieldManager: FieldManager})
		if apierrors.IsConflict(err) {
			fresh, gerr := client.Get(ctx, r.key.name, metav1.GetOptions{})
			if gerr != nil {
				return gerr
			}
			h = fresh
			if r.standingDown {
				c := findCondition(r.status.Conditions, ConditionStandingDown)
				st = *fresh.Status.DeepCopy()
				st.Conditions = setCondition(st.Conditions, c.Type, c.Status, c.Reason, c.Message, r.now)
			}
		}
		return err
	})
	if err != nil {
		if !apierrors.IsNotFound(err) && ctx.Err() == nil {
			r.event(corev1.EventTypeWarning, "FailedUpdateStatus", "%s", err.Error())
		}
		return fmt.Errorf("failed to update status for %s: %w", r.key.name, err)
	}
	return r.annotate(ctx, true)
}

// annotate sets the decision annotations on the HPA to this reconcile's
// decision when its status was just written, or when they are missing;
// an unchanged HPA costs no request.
func (r *run) annotate(ctx context.Context, statusWritten bool) error {
	if r.decisionID == "" {
		return nil
	}
	current, has := r.hpa.Annotations[DecisionAnnotation]
	if current == r.decisionID || (has && !statusWritten) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		DecisionAnnotation:    r.decisionID,
		ExplanationAnnotation: r.c.explanationLink(r.target),
	}}})
	if err != nil {
		return err
	}
	_, err = r.c.opts.Kube.AutoscalingV2().HorizontalPodAutoscalers(r.key.namespace).Patch(ctx, r.key.name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("agent: annotate %s: %w", r.key, err)
	}
	return nil
}

// explanationLink says where a target's decisions are explained: its page
// in the web console at Options.ConsoleURL, or the setpointctl command.
func (c *Controller) explanationLink(t Target) string {
	if c.opts.ConsoleURL == "" {
		return "setpointctl explain " + t.Cluster + "/" + t.Namespace + "/" + t.Name
	}
	return strings.TrimSuffix(c.opts.ConsoleURL, "/") + "/#/t/" + url.PathEscape(t.Cluster) + "/" + url.PathEscape(t.Namespace) + "/" + url.PathEscape(t.Name)
}
