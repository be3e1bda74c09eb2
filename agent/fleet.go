package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	"github.com/setpointhq/setpoint/hpa"
	"github.com/setpointhq/setpoint/hpa/metriclabel"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// FleetService is the part of the Setpoint service's FleetService that a
// fleet member's agent calls. The generated client
// (setpointv1.NewFleetServiceClient) implements it; errors are gRPC status
// errors, as Service's are.
type FleetService interface {
	// GetFleet reads a fleet; the agent needs its spec before its first
	// report.
	GetFleet(ctx context.Context, in *setpointv1.GetFleetRequest, opts ...grpc.CallOption) (*setpointv1.GetFleetResponse, error)
	// Report sends the member's report and returns its share.
	Report(ctx context.Context, in *setpointv1.ReportRequest, opts ...grpc.CallOption) (*setpointv1.ReportResponse, error)
}

// Share reasons of the API (setpoint.v1.FleetShare.reason) the agent acts
// on.
const shareExcluded = "Excluded"

// memberReading is what one sync of a fleet member read in its cluster.
type memberReading struct {
	// report is the member's report, ready to send.
	report *setpointv1.FleetReport
	// sc is the workload's Scale as read, nil when it could not be read
	// (report.cannot_scale then says why); gr its resource.
	sc *autoscalingv1.Scale
	gr schema.GroupResource
	// metrics are the fleet's metrics the report follows, the API
	// server's default (80% cpu) when the fleet lists none.
	metrics []autoscalingv2.MetricSpec
	// ambiguous is the AmbiguousSelector message when another autoscaler
	// of this cluster selects the workload's pods.
	ambiguous string
}

// reconcileFleet is one sync of a fleet member (spec.fleet set): it reads
// the workload's Scale, pods and the metrics of the fleet's spec through
// the same code as any Autoscaler, reports them to the fleet, and sets the
// workload's replicas to the member's share whenever they differ. The
// Autoscaler's own limits, metrics and behavior are not used.
func (r *run) reconcileFleet(ctx context.Context) (string, error) {
	if r.c.opts.Fleets == nil {
		return r.invalidSpec(ctx, "spec.fleet is set, but this agent has no fleet service client", errors.New("agent: Options.Fleets is nil"))
	}
	fk := &setpointv1.FleetKey{Namespace: r.meta.Namespace, Name: r.spec.Fleet.Name}
	if other := r.c.firstMember(r.key, fk.GetName()); other != "" {
		text := fmt.Sprintf("Autoscaler %s/%s is this cluster's member of fleet %s already: a fleet has one member per cluster", fk.GetNamespace(), other, fk.GetName())
		return r.invalidSpec(ctx, text, errors.New(text))
	}
	spec, err := r.fleetSpec(ctx, fk)
	if err != nil {
		return r.fleetFailed(ctx, err)
	}
	var (
		m    *memberReading
		resp *setpointv1.ReportResponse
	)
	// A report that followed an older spec's metrics than the fleet's is
	// sent again, once, with the metrics of the spec the answer carries.
	for attempt := 0; ; attempt++ {
		if m, err = r.readMember(ctx, spec); err != nil {
			return resultError, err
		}
		if resp, err = r.report(ctx, fk, m.report); err != nil {
			return r.fleetFailed(ctx, err)
		}
		next := resp.GetSpec()
		if next != nil {
			r.c.rememberFleetSpec(r.key.String(), fk.GetName(), next)
		}
		if next == nil || attempt > 0 || sameMetrics(spec, next) {
			break
		}
		spec = next
	}
	return r.applyShare(ctx, fk, m, resp)
}

// firstMember is the name of the Autoscaler of k's namespace, other than
// k, that is a member of fleet and comes first by name; "" when there is
// none. Only the first one of a cluster reports for it: two would report
// as the same member and undo each other's reports.
func (c *Controller) firstMember(k objectKey, fleet string) string {
	objs, err := c.autoscalers.GetIndexer().ByIndex(cache.NamespaceIndex, k.namespace)
	if err != nil {
		objs = c.autoscalers.GetIndexer().List()
	}
	first := ""
	for _, o := range objs {
		a, err := autoscalerOf(o)
		if err != nil || a.Namespace != k.namespace || a.Name >= k.name || a.Spec.Fleet == nil || a.Spec.Fleet.Name != fleet {
			continue
		}
		if first == "" || a.Name < first {
			first = a.Name
		}
	}
	return first
}

// notInFleet clears what a fleet member's status holds from an
// Autoscaler that is not (or no longer) one.
func (r *run) notInFleet() {
	r.status.FleetReplicas = nil
	r.status.Conditions = removeCondition(r.status.Conditions, v1alpha1.ConditionFleetShare)
}

// fleetSpec is the fleet's spec the member's report follows: the one the
// last answer carried, or the fleet's as GetFleet reads it.
func (r *run) fleetSpec(ctx context.Context, fk *setpointv1.FleetKey) (*setpointv1.FleetSpec, error) {
	key := r.key.String()
	r.c.mu.Lock()
	ks := r.c.keys[key]
	var spec *setpointv1.FleetSpec
	if ks != nil && ks.fleet == fk.GetName() {
		spec = ks.fleetSpec
	}
	r.c.mu.Unlock()
	if spec != nil {
		return spec, nil
	}
	callCtx, cancel := context.WithTimeout(ctx, r.c.opts.RecommendTimeout)
	defer cancel()
	resp, err := r.c.opts.Fleets.GetFleet(callCtx, &setpointv1.GetFleetRequest{Fleet: fk})
	if err != nil {
		return nil, err
	}
	spec = resp.GetFleet().GetSpec()
	if spec == nil {
		return nil, status.Errorf(codes.Internal, "agent: fleet %s/%s has no spec", fk.GetNamespace(), fk.GetName())
	}
	r.c.rememberFleetSpec(key, fk.GetName(), spec)
	return spec, nil
}

// rememberFleetSpec keeps spec as the fleet spec of the Autoscaler key,
// a member of fleet; a nil spec forgets it.
func (c *Controller) rememberFleetSpec(key, fleet string, spec *setpointv1.FleetSpec) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ks := c.keys[key]
	if ks == nil {
		ks = &keyState{}
		c.keys[key] = ks
	}
	ks.fleet, ks.fleetSpec = fleet, spec
}

// sameMetrics reports whether two fleet specs list the same metrics, so a
// report that follows one follows the other.
func sameMetrics(a, b *setpointv1.FleetSpec) bool {
	am, bm := a.GetAutoscaler().GetMetrics(), b.GetAutoscaler().GetMetrics()
	if len(am) != len(bm) {
		return false
	}
	for i := range am {
		if !proto.Equal(am[i], bm[i]) {
			return false
		}
	}
	return true
}

// readMember reads what the member's report carries: the workload's
// Scale, its pods and the fleet's metrics, through the same calls and
// conversion (hpa.Request) as an Autoscaler's request. A workload that is
// missing, whose Scale cannot be read for good, or whose last Scale update
// failed and a write of its current count is now refused, makes the
// report say that the member cannot scale; a passing failure to read the
// Scale is an error (retried with back-off, no report).
func (r *run) readMember(ctx context.Context, spec *setpointv1.FleetSpec) (*memberReading, error) {
	ref := r.spec.ScaleTargetRef
	m := &memberReading{
		report:  &setpointv1.FleetReport{Member: r.c.opts.Cluster},
		metrics: metricsOf(spec.GetAutoscaler().GetMetrics()),
	}
	if len(m.metrics) == 0 {
		m.metrics = []autoscalingv2.MetricSpec{hpa.DefaultMetric()}
	}
	sc, gr, err := r.c.scaleFor(ctx, r.meta.Namespace, ref)
	if err != nil {
		r.event(corev1.EventTypeWarning, "FailedGetScale", "%s", err.Error())
		r.status.Conditions = setCondition(r.status.Conditions, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedGetScale",
			fmt.Sprintf("the agent was unable to get the target's current scale: %v", err), r.now)
		if !refused(err) && !meta.IsNoMatchError(err) {
			if serr := r.writeStatus(ctx); serr != nil {
				klog.FromContext(ctx).Error(serr, "agent: update status")
			}
			return nil, fmt.Errorf("agent: get scale of %s: %w", reference(ref), err)
		}
		// Nothing was read; the report still has one (empty) observation
		// per metric of the spec, as every report must.
		req := hpa.Request(&hpa.Reading{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: ref, Metrics: m.metrics}})
		m.report.Scale, m.report.Observations = req.Scale, req.Observations
		m.report.CannotScale = fmt.Sprintf("cannot read the scale of %s: %v", reference(ref), err)
		return m, nil
	}
	m.sc, m.gr = sc, gr
	r.status.CurrentReplicas = sc.Spec.Replicas
	r.status.Conditions = setCondition(r.status.Conditions, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededGetScale",
		"the agent was able to get the target's current scale", r.now)
	if c := findCondition(r.prev.Conditions, autoscalingv2.AbleToScale); c != nil && c.Status == corev1.ConditionFalse && c.Reason == "FailedUpdateScale" {
		// The last share could not be applied: writing the current count
		// says whether the Scale can be written now.
		if err := r.c.updateScale(ctx, r.meta.Namespace, gr, sc, sc.Spec.Replicas); err != nil {
			r.status.Conditions = setCondition(r.status.Conditions, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedUpdateScale",
				fmt.Sprintf("the agent was unable to update the target scale: %v", err), r.now)
			if refused(err) {
				m.report.CannotScale = fmt.Sprintf("cannot update the scale of %s: %v", reference(ref), err)
			}
		}
	}
	selector, pods, ambiguous, err := r.podsOf(sc, true)
	if err != nil {
		return nil, err
	}
	if ambiguous != "" {
		r.event(corev1.EventTypeWarning, "AmbiguousSelector", "%s", ambiguous)
		m.ambiguous, m.report.CannotScale = ambiguous, ambiguous
	}
	rm, values, _ := r.c.opts.Metrics.fetchMetrics(ctx, r.meta.Namespace, &v1alpha1.AutoscalerSpec{Metrics: m.metrics}, selector)
	req := hpa.Request(&hpa.Reading{
		Spec:            autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: ref, Metrics: m.metrics},
		Scale:           scaleOf(sc),
		Pods:            pods,
		ResourceMetrics: rm,
		Metrics:         values,
	})
	m.report.Scale, m.report.Pods, m.report.ResourceMetrics, m.report.Observations = req.Scale, req.Pods, req.ResourceMetrics, req.Observations
	return m, nil
}

// refused reports whether the Kubernetes API refused a request for good
// (a 4xx answer other than a conflict or too many requests: not found,
// forbidden, invalid, …), as opposed to a passing failure.
func refused(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	code := st.Status().Code
	return code >= 400 && code < 500 && code != http.StatusConflict && code != http.StatusTooManyRequests
}

// report sends the member's report with the Recommend deadline.
func (r *run) report(ctx context.Context, fk *setpointv1.FleetKey, rep *setpointv1.FleetReport) (*setpointv1.ReportResponse, error) {
	callCtx, cancel := context.WithTimeout(ctx, r.c.opts.RecommendTimeout)
	defer cancel()
	resp, err := r.c.opts.Fleets.Report(callCtx, &setpointv1.ReportRequest{Fleet: fk, Report: rep})
	if err == nil && resp == nil {
		err = status.Error(codes.Internal, "agent: service returned no report response")
	}
	return resp, err
}

// fleetFailed records a failed fleet call as serviceFailed does. A spec
// the service rejects is forgotten, so the next sync reads the fleet's
// afresh; a fleet the member may not read (or that does not exist) is
// tried again at the next sync, not with back-off.
func (r *run) fleetFailed(ctx context.Context, err error) (string, error) {
	code := status.Code(err)
	if code == codes.InvalidArgument {
		r.c.rememberFleetSpec(r.key.String(), "", nil)
	}
	result, rerr := r.serviceFailed(ctx, err)
	switch code {
	case codes.PermissionDenied, codes.NotFound, codes.FailedPrecondition, codes.Unauthenticated:
		rerr = fmt.Errorf("%w: %v", errTerminal, rerr)
	}
	return result, rerr
}

// applyShare writes what the fleet answered into the status and sets the
// workload's replicas to the member's share when they differ. With no
// share yet, or when the last split left the member out, the replicas are
// left as they are: an excluded member's share is 0 only because the
// fleet did not count it.
func (r *run) applyShare(ctx context.Context, fk *setpointv1.FleetKey, m *memberReading, resp *setpointv1.ReportResponse) (string, error) {
	logger := klog.FromContext(ctx)
	r.status.Conditions = setCondition(r.status.Conditions, v1alpha1.ConditionServiceAvailable, corev1.ConditionTrue, v1alpha1.ReasonServiceAvailable,
		"the Setpoint service answered the last request", r.now)
	r.fleetDecision(fk, m.metrics, resp)
	if m.ambiguous != "" {
		r.status.Conditions = setCondition(r.status.Conditions, autoscalingv2.ScalingActive, corev1.ConditionFalse, "AmbiguousSelector", m.ambiguous, r.now)
	}
	if m.report.GetCannotScale() != "" {
		r.event(corev1.EventTypeWarning, v1alpha1.ReasonCannotScale, "reported to fleet %s that this member cannot scale: %s", fk.GetName(), m.report.GetCannotScale())
	}

	current := r.status.CurrentReplicas
	share := resp.GetShare()
	prevShare := findCondition(r.prev.Conditions, v1alpha1.ConditionFleetShare)
	hadShare := prevShare != nil && prevShare.Status == corev1.ConditionTrue
	switch {
	case share == nil:
		r.status.DesiredReplicas, r.status.FleetReplicas = current, nil
		r.c.opts.Prometheus.decided(r.meta.Namespace, r.meta.Name, nil, current, &Recommendation{DesiredReplicas: current}, nil)
		r.status.Conditions = setCondition(r.status.Conditions, v1alpha1.ConditionFleetShare, corev1.ConditionFalse, v1alpha1.ReasonNoSplit,
			fmt.Sprintf("fleet %s has not split its total yet; the replicas are left as they are", fk.GetName()), r.now)
		return resultSuccess, r.writeStatus(ctx)
	case share.GetReason() == shareExcluded:
		r.status.DesiredReplicas, r.status.FleetReplicas = current, ptr.To(resp.GetTotal())
		r.c.opts.Prometheus.decided(r.meta.Namespace, r.meta.Name, nil, current, &Recommendation{DesiredReplicas: current}, nil)
		msg := fmt.Sprintf("fleet %s's last split left this member out (%s): %s; the replicas are left as they are", fk.GetName(), share.GetExclusion(), share.GetMessage())
		r.status.Conditions = setCondition(r.status.Conditions, v1alpha1.ConditionFleetShare, corev1.ConditionFalse, v1alpha1.ReasonExcluded, msg, r.now)
		if hadShare {
			r.event(corev1.EventTypeNormal, v1alpha1.ReasonShareChanged, "%s", msg)
		}
		return resultSuccess, r.writeStatus(ctx)
	}

	want := share.GetReplicas()
	r.status.DesiredReplicas, r.status.FleetReplicas = want, ptr.To(resp.GetTotal())
	// The member's desired_replicas series is its share; the fleet's
	// metrics are the fleet's, not this Autoscaler's.
	r.c.opts.Prometheus.decided(r.meta.Namespace, r.meta.Name, nil, current, &Recommendation{DesiredReplicas: want}, nil)
	r.status.Conditions = setCondition(r.status.Conditions, v1alpha1.ConditionFleetShare, corev1.ConditionTrue, share.GetReason(), share.GetMessage(), r.now)
	if !hadShare || r.prev.DesiredReplicas != want {
		was := "none"
		if hadShare {
			was = fmt.Sprint(r.prev.DesiredReplicas)
		}
		r.event(corev1.EventTypeNormal, v1alpha1.ReasonShareChanged, "share %d of fleet %s's %d replicas (was %s): %s", want, fk.GetName(), resp.GetTotal(), was, share.GetMessage())
	}
	if m.sc == nil || m.report.GetCannotScale() != "" || want == current {
		return resultSuccess, r.writeStatus(ctx)
	}

	r.action = metriclabel.ActionOf(true, want, current)
	if err := r.c.updateScale(ctx, r.meta.Namespace, m.gr, m.sc, want); err != nil {
		r.c.opts.Prometheus.rescaled("failed")
		r.event(corev1.EventTypeWarning, "FailedRescale", "New size: %d; reason: share of fleet %s; error: %v", want, fk.GetName(), err)
		r.status.Conditions = setCondition(r.status.Conditions, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedUpdateScale",
			fmt.Sprintf("the agent was unable to update the target scale: %v", err), r.now)
		rerr := fmt.Errorf("agent: rescale %s to %d: %w", reference(r.spec.ScaleTargetRef), want, err)
		if refused(err) {
			// Tell the fleet now, so its next decision moves this share
			// to the other members; the next sync tries the Scale again.
			m.report.CannotScale = fmt.Sprintf("cannot update the scale of %s: %v", reference(r.spec.ScaleTargetRef), err)
			if _, ferr := r.report(ctx, fk, m.report); ferr != nil {
				logger.Error(ferr, "agent: report that the member cannot scale")
			}
			r.event(corev1.EventTypeWarning, v1alpha1.ReasonCannotScale, "reported to fleet %s that this member cannot scale: %s", fk.GetName(), m.report.GetCannotScale())
			rerr = fmt.Errorf("%w: %v", errTerminal, rerr)
		}
		if serr := r.writeStatus(ctx); serr != nil {
			logger.Error(serr, "agent: update status")
		}
		return resultError, rerr
	}
	r.c.opts.Prometheus.rescaled("applied")
	r.status.LastScaleTime = &r.now
	r.status.Conditions = setCondition(r.status.Conditions, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededRescale",
		fmt.Sprintf("the agent updated the target scale to %d, its share of fleet %s", want, fk.GetName()), r.now)
	r.event(corev1.EventTypeNormal, "SuccessfulRescale", "New size: %d; reason: share of fleet %s (%s)", want, fk.GetName(), share.GetReason())
	logger.Info("agent: rescaled to the fleet's share", "target", reference(r.spec.ScaleTargetRef), "from", current, "to", want, "fleet", fk.GetName(), "total", resp.GetTotal())
	// No second report of the applied share: until this member's next
	// report, the service counts it at the share it was answered with
	// (its report was read before that answer), so the fleet's next
	// decision does not pool this member's old count with the others' new
	// ones.
	if err := r.writeStatus(ctx); err != nil {
		return resultError, err
	}
	return resultSuccess, nil
}

// fleetDecision writes the fleet's last decision into the status: its
// conditions but AbleToScale (which stays this member's own: whether its
// workload's Scale could be read and written), the pooled metrics'
// current values, the targets column (metrics are the fleet's, in force)
// and the explanation with the split.
func (r *run) fleetDecision(fk *setpointv1.FleetKey, metrics []autoscalingv2.MetricSpec, resp *setpointv1.ReportResponse) {
	d := resp.GetDecision()
	if d == nil {
		r.status.CurrentMetrics = nil
		r.status.Targets = formatTargets(metrics, nil)
		r.status.Explanation = nil
		return
	}
	rec := recommendationOf(d)
	var decided []autoscalingv2.HorizontalPodAutoscalerCondition
	for _, c := range rec.Conditions {
		if c.Type != autoscalingv2.AbleToScale {
			decided = append(decided, c)
		}
	}
	r.status.Conditions = mergeConditions(r.status.Conditions, decided, r.now)
	r.status.CurrentMetrics = rec.CurrentMetrics
	r.status.Targets = formatTargets(metrics, rec.CurrentMetrics)
	e := rec.Explanation
	e.Summary = fmt.Sprintf("fleet %s: %s", fk.GetName(), e.Summary)
	if msg := resp.GetSplit().GetMessage(); msg != "" {
		e.Summary += "; split: " + msg
	}
	r.status.Explanation = &e
}

// metricsOf converts the API's metric specs (a fleet's) into the
// Kubernetes form the metric fetches and the targets column read. Values
// that do not parse are left out; the service has validated the spec.
func metricsOf(in []*setpointv1.MetricSpec) []autoscalingv2.MetricSpec {
	out := make([]autoscalingv2.MetricSpec, 0, len(in))
	for _, m := range in {
		ms := autoscalingv2.MetricSpec{Type: autoscalingv2.MetricSourceType(m.GetType())}
		if s := m.GetResource(); s != nil {
			ms.Resource = &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceName(s.GetName()), Target: metricTargetOf(s.GetTarget())}
		}
		if s := m.GetContainerResource(); s != nil {
			ms.ContainerResource = &autoscalingv2.ContainerResourceMetricSource{Name: corev1.ResourceName(s.GetName()), Container: s.GetContainer(), Target: metricTargetOf(s.GetTarget())}
		}
		if s := m.GetPods(); s != nil {
			ms.Pods = &autoscalingv2.PodsMetricSource{Metric: identifierFrom(s.GetMetric()), Target: metricTargetOf(s.GetTarget())}
		}
		if s := m.GetObject(); s != nil {
			ref := s.GetDescribedObject()
			ms.Object = &autoscalingv2.ObjectMetricSource{
				DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: ref.GetApiVersion(), Kind: ref.GetKind(), Name: ref.GetName()},
				Metric:          identifierFrom(s.GetMetric()),
				Target:          metricTargetOf(s.GetTarget()),
			}
		}
		if s := m.GetExternal(); s != nil {
			ms.External = &autoscalingv2.ExternalMetricSource{Metric: identifierFrom(s.GetMetric()), Target: metricTargetOf(s.GetTarget())}
		}
		out = append(out, ms)
	}
	return out
}

func metricTargetOf(t *setpointv1.MetricTarget) autoscalingv2.MetricTarget {
	if t == nil {
		return autoscalingv2.MetricTarget{}
	}
	return autoscalingv2.MetricTarget{
		Type:               autoscalingv2.MetricTargetType(t.GetType()),
		Value:              parseQuantity(t.GetValue()),
		AverageValue:       parseQuantity(t.GetAverageValue()),
		AverageUtilization: t.AverageUtilization,
	}
}
