package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeService is a hand-written Service that answers from fields and
// records every call.
type fakeService struct {
	mu        sync.Mutex
	rec       *Recommendation
	err       error
	requests  []*Request
	observed  []Observation
	deleted   []Target
	deleteErr error
}

func (f *fakeService) Recommend(_ context.Context, req *Request) (*Recommendation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, req)
	if f.err != nil {
		return nil, f.err
	}
	r := *f.rec
	return &r, nil
}

func (f *fakeService) Observe(_ context.Context, obs *Observation) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.observed = append(f.observed, *obs)
	return nil
}

func (f *fakeService) DeleteTarget(_ context.Context, t Target) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, t)
	return f.deleteErr
}

// fakeScales is a hand-written ScalesGetter over an in-memory map; it can
// fail the next updates with a conflict.
type fakeScales struct {
	mu        sync.Mutex
	scales    map[string]*autoscalingv1.Scale // by namespace/name
	conflicts int
	updates   int
	// updateErr, when set, fails every update; getErr every read.
	updateErr, getErr error
}

func (f *fakeScales) Scales(namespace string) scale.ScaleInterface {
	return &fakeScaleInterface{f: f, ns: namespace}
}

type fakeScaleInterface struct {
	f  *fakeScales
	ns string
}

func (s *fakeScaleInterface) Get(_ context.Context, gr schema.GroupResource, name string, _ metav1.GetOptions) (*autoscalingv1.Scale, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if s.f.getErr != nil {
		return nil, s.f.getErr
	}
	sc, ok := s.f.scales[s.ns+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(gr, name)
	}
	return sc.DeepCopy(), nil
}

func (s *fakeScaleInterface) Update(_ context.Context, gr schema.GroupResource, sc *autoscalingv1.Scale, _ metav1.UpdateOptions) (*autoscalingv1.Scale, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if s.f.updateErr != nil {
		return nil, s.f.updateErr
	}
	if s.f.conflicts > 0 {
		s.f.conflicts--
		// Someone else wrote the object meanwhile (not its replicas).
		s.f.scales[s.ns+"/"+sc.Name].ResourceVersion += "x"
		return nil, apierrors.NewConflict(gr, sc.Name, errors.New("the object has been modified"))
	}
	cur := s.f.scales[s.ns+"/"+sc.Name]
	if cur.ResourceVersion != sc.ResourceVersion {
		return nil, apierrors.NewConflict(gr, sc.Name, errors.New("stale resourceVersion"))
	}
	s.f.updates++
	out := sc.DeepCopy()
	out.ResourceVersion += "u"
	s.f.scales[s.ns+"/"+sc.Name] = out
	return out.DeepCopy(), nil
}

func (s *fakeScaleInterface) Patch(context.Context, schema.GroupVersionResource, string, types.PatchType, []byte, metav1.PatchOptions) (*autoscalingv1.Scale, error) {
	return nil, errors.New("not implemented")
}

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func testAutoscaler() *v1alpha1.Autoscaler {
	return &v1alpha1.Autoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.Group + "/" + v1alpha1.Version, Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Generation: 3, ResourceVersion: "10"},
		Spec: v1alpha1.AutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](1),
			MaxReplicas:    10,
			Metrics: []autoscalingv2.MetricSpec{
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
					Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}},
				{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: "queue"},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("30"))}}},
			},
		},
	}
}

// callerInformers are the informers a caller passes to New, from new
// factories over kube and dyn; nothing starts them.
func callerInformers(serve Serve, kube kubernetes.Interface, dyn dynamic.Interface) Informers {
	return InformersFrom(serve, informers.NewSharedInformerFactory(kube, 0), dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0))
}

type harness struct {
	c       *Controller
	svc     *fakeService
	scales  *fakeScales
	dyn     *dynamicfake.FakeDynamicClient
	events  *record.FakeRecorder
	a       *v1alpha1.Autoscaler
	pods    []*corev1.Pod
	setupFn func(*Options)
}

func newHarness(t *testing.T, a *v1alpha1.Autoscaler, rec *Recommendation) *harness {
	t.Helper()
	h := &harness{
		svc:    &fakeService{rec: rec},
		scales: &fakeScales{scales: map[string]*autoscalingv1.Scale{}},
		events: record.NewFakeRecorder(100),
		a:      a,
	}
	h.scales.scales["ns/web"] = &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: "1"},
		Spec:       autoscalingv1.ScaleSpec{Replicas: 2},
		Status:     autoscalingv1.ScaleStatus{Replicas: 2, Selector: "app=web"},
	}
	u, err := v1alpha1.ToUnstructured(a)
	if err != nil {
		t.Fatal(err)
	}
	h.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{v1alpha1.AutoscalerResource: "AutoscalerList"}, u)
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "apps", Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	kube := kubefake.NewClientset()
	c, err := New(Options{
		Kube:      kube,
		Dynamic:   h.dyn,
		Informers: callerInformers(ServeAutoscalers, kube, h.dyn),
		Scales:    h.scales,
		Mapper:    mapper,
		Service:   h.svc,
		Events:    h.events,
		Cluster:   "c1",
		Clock:     clocktesting.NewFakePassiveClock(now),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.queue.ShutDown)
	cached, err := typedAutoscaler(u)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.autoscalers.GetIndexer().Add(cached); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", Labels: map[string]string{"app": "web"}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-1", Labels: map[string]string{"app": "db"}}}
	for _, p := range []*corev1.Pod{pod, other} {
		if err := c.podIndex.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	h.c = c
	return h
}

// status reads the Autoscaler's status as written through the dynamic
// client.
func (h *harness) status(t *testing.T) v1alpha1.AutoscalerStatus {
	t.Helper()
	u, err := h.dyn.Resource(v1alpha1.AutoscalerResource).Namespace("ns").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := v1alpha1.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	return a.Status
}

func (h *harness) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-h.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func scaleUp() *Recommendation {
	return &Recommendation{
		DecisionID:      "d1",
		DesiredReplicas: 4,
		Rescale:         true,
		Reason:          "cpu resource utilization (percentage of request) above target",
		Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{
			{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, Reason: "SucceededRescale", Message: "the HPA controller was able to update the target scale to 4"},
		},
		CurrentMetrics: []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{
			Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To[int32](100)}}}},
		Explanation: v1alpha1.Explanation{Summary: "cpu proposed 4", Winner: "cpu resource utilization (percentage of request)", Proposal: 4},
	}
}

func TestReconcileRescales(t *testing.T) {
	// The External metric failed; the CPU metric's proposal is applied.
	rec := scaleUp()
	rec.Metrics = []MetricProposal{{Proposal: 4}, {Failed: true, Err: "unable to get external metric ns/queue/nil: no metrics returned from external metrics API"}}
	rec.Error = "invalid metrics (1 invalid out of 2), first error is: failed to get queue external metric value: failed to get queue external metric: unable to get external metric ns/queue/nil: no metrics returned from external metrics API"
	h := newHarness(t, testAutoscaler(), rec)
	if err := h.c.reconcile(context.Background(), "ns/web"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if got := h.scales.scales["ns/web"].Spec.Replicas; got != 4 {
		t.Errorf("scale replicas = %d, want 4", got)
	}
	req := h.svc.requests[0]
	if diff := cmp.Diff(Target{Cluster: "c1", Namespace: "ns", Name: "web"}, req.Target); diff != "" {
		t.Errorf("target (-want +got):\n%s", diff)
	}
	if len(req.Pods) != 1 || req.Pods[0].Name != "web-1" {
		t.Errorf("pods = %v, want only web-1 (selected by app=web)", req.Pods)
	}
	if !req.ResourceMetrics.Fetched || req.ResourceMetrics.Err == nil {
		t.Errorf("resource metrics: fetched=%v err=%v, want a recorded error (no client)", req.ResourceMetrics.Fetched, req.ResourceMetrics.Err)
	}
	if len(req.Metrics) != 2 || req.Metrics[1].Err == nil || req.Metrics[0].Err != nil {
		t.Errorf("per-metric errors = %+v, want an error on the External metric only", req.Metrics)
	}
	if diff := cmp.Diff([]Observation{{Target: req.Target, DecisionID: "d1", Kind: ObservedApplied, From: 2, To: 4, At: now}}, h.svc.observed); diff != "" {
		t.Errorf("observations (-want +got):\n%s", diff)
	}
	st := h.status(t)
	if st.DesiredReplicas != 4 || st.CurrentReplicas != 2 || st.ObservedGeneration != 3 || st.LastScaleTime == nil {
		t.Errorf("status = %+v", st)
	}
	if st.Reference != "Deployment/web" || st.Targets != "cpu: 100%/50%, <unknown>/30 (avg)" {
		t.Errorf("reference %q targets %q", st.Reference, st.Targets)
	}
	if c := findCondition(st.Conditions, v1alpha1.ConditionServiceAvailable); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("ServiceAvailable = %+v", c)
	}
	evs := strings.Join(h.drainEvents(), "\n")
	if strings.Contains(evs, "FailedComputeMetricsReplicas") {
		t.Errorf("FailedComputeMetricsReplicas emitted though only one metric of two failed:\n%s", evs)
	}
	for _, want := range []string{
		"Warning FailedGetExternalMetric unable to get external metric ns/queue/nil: no metrics returned from external metrics API",
		"Normal SuccessfulRescale New size: 4; reason: cpu resource utilization (percentage of request) above target",
	} {
		if !strings.Contains(evs, want) {
			t.Errorf("events lack %q:\n%s", want, evs)
		}
	}
}

func TestReconcileRetriesConflict(t *testing.T) {
	h := newHarness(t, testAutoscaler(), scaleUp())
	h.scales.conflicts = 2
	if err := h.c.reconcile(context.Background(), "ns/web"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if got := h.scales.scales["ns/web"].Spec.Replicas; got != 4 || h.scales.updates != 1 {
		t.Errorf("replicas = %d after %d updates, want 4 after 1", got, h.scales.updates)
	}
}

func TestReconcileDryRun(t *testing.T) {
	a := testAutoscaler()
	a.Spec.DryRun = true
	h := newHarness(t, a, scaleUp())
	if err := h.c.reconcile(context.Background(), "ns/web"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if h.scales.updates != 0 || len(h.svc.observed) != 0 {
		t.Errorf("dry run wrote the scale (%d updates) or observed %v", h.scales.updates, h.svc.observed)
	}
	st := h.status(t)
	if st.DesiredReplicas != 4 || !strings.HasPrefix(st.Explanation.Summary, "dry run") {
		t.Errorf("status = %+v", st)
	}
	if c := findCondition(st.Conditions, autoscalingv2.AbleToScale); c == nil || c.Reason != "DryRun" {
		t.Errorf("AbleToScale = %+v, want reason DryRun", c)
	}
}

func TestReconcilePaused(t *testing.T) {
	a := testAutoscaler()
	a.Spec.Paused = true
	h := newHarness(t, a, scaleUp())
	if err := h.c.reconcile(context.Background(), "ns/web"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if len(h.svc.requests) != 0 || h.scales.updates != 0 {
		t.Errorf("paused: %d requests, %d updates", len(h.svc.requests), h.scales.updates)
	}
	if c := findCondition(h.status(t).Conditions, v1alpha1.ConditionPaused); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("Paused = %+v", c)
	}
}

func TestReconcileServiceUnavailable(t *testing.T) {
	for _, code := range []codes.Code{codes.Unavailable, codes.DeadlineExceeded} {
		t.Run(code.String(), func(t *testing.T) {
			h := newHarness(t, testAutoscaler(), nil)
			h.svc.err = status.Error(code, "connection refused")
			err := h.c.reconcile(context.Background(), "ns/web")
			if err == nil || errors.Is(err, errTerminal) {
				t.Fatalf("reconcile = %v, want a retryable error", err)
			}
			if h.scales.updates != 0 {
				t.Errorf("scale written while the service was down")
			}
			c := findCondition(h.status(t).Conditions, v1alpha1.ConditionServiceAvailable)
			if c == nil || c.Status != corev1.ConditionFalse || c.Reason != v1alpha1.ReasonServiceUnavailable {
				t.Errorf("ServiceAvailable = %+v", c)
			}
		})
	}
}

func TestReconcileInvalidArgument(t *testing.T) {
	h := newHarness(t, testAutoscaler(), nil)
	st, _ := status.New(codes.InvalidArgument, "setpoint: invalid request").WithDetails(&errdetails.BadRequest{
		FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "spec.metrics[1].external.target.average_value", Description: "must be positive"}},
	})
	h.svc.err = st.Err()
	err := h.c.reconcile(context.Background(), "ns/web")
	if !errors.Is(err, errTerminal) {
		t.Fatalf("reconcile = %v, want a terminal error (no hot loop)", err)
	}
	c := findCondition(h.status(t).Conditions, v1alpha1.ConditionServiceAvailable)
	want := "the Setpoint service rejected the request: spec.metrics[1].external.target.average_value: must be positive"
	if c == nil || c.Reason != v1alpha1.ReasonInvalidSpec || c.Message != want {
		t.Errorf("ServiceAvailable = %+v", c)
	}
	if evs := strings.Join(h.drainEvents(), "\n"); !strings.Contains(evs, "Warning InvalidSpec "+want) {
		t.Errorf("events:\n%s", evs)
	}
}

// The replica count the last reconcile left is read from the status, so a
// change made by someone else is seen by a controller that did not make
// the last reconcile (a new leader).
func TestReconcileObservesExternalChange(t *testing.T) {
	rec := scaleUp()
	rec.Rescale, rec.DesiredReplicas = false, 2
	h := newHarness(t, testAutoscaler(), rec)
	if err := h.c.reconcile(context.Background(), "ns/web"); err != nil {
		t.Fatal(err)
	}
	written := testAutoscaler()
	written.Status = h.status(t)
	h = newHarness(t, written, rec)
	h.scales.scales["ns/web"].Spec.Replicas = 7
	rec2 := *rec
	rec2.DesiredReplicas = 7
	h.svc.rec = &rec2
	if err := h.c.reconcile(context.Background(), "ns/web"); err != nil {
		t.Fatal(err)
	}
	want := []Observation{{Target: Target{Cluster: "c1", Namespace: "ns", Name: "web"}, Kind: ObservedExternal, From: 2, To: 7, At: now}}
	if diff := cmp.Diff(want, h.svc.observed); diff != "" {
		t.Errorf("observations (-want +got):\n%s", diff)
	}
}

func TestLeftAt(t *testing.T) {
	able := func(reason string) []autoscalingv2.HorizontalPodAutoscalerCondition {
		return []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, Reason: reason}}
	}
	for _, tc := range []struct {
		name  string
		s     v1alpha1.AutoscalerStatus
		want  int32
		known bool
	}{
		{name: "never reconciled", s: v1alpha1.AutoscalerStatus{}},
		{name: "scale unread", s: v1alpha1.AutoscalerStatus{CurrentReplicas: 3, Conditions: able("FailedGetScale")}},
		{name: "rescaled", s: v1alpha1.AutoscalerStatus{CurrentReplicas: 3, DesiredReplicas: 5, Conditions: able("SucceededRescale")}, want: 5, known: true},
		{name: "not rescaled", s: v1alpha1.AutoscalerStatus{CurrentReplicas: 3, DesiredReplicas: 3, Conditions: able("SucceededGetScale")}, want: 3, known: true},
		{name: "rescale failed", s: v1alpha1.AutoscalerStatus{CurrentReplicas: 3, DesiredReplicas: 1, Conditions: able("FailedUpdateScale")}, want: 3, known: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, known := leftAt(&tc.s)
			if got != tc.want || known != tc.known {
				t.Errorf("leftAt = %d, %v; want %d, %v", got, known, tc.want, tc.known)
			}
		})
	}
}

func TestReconcileDeleted(t *testing.T) {
	h := newHarness(t, testAutoscaler(), nil)
	u, _ := v1alpha1.ToUnstructured(h.a)
	if err := h.c.autoscalers.GetIndexer().Delete(u); err != nil {
		t.Fatal(err)
	}
	if err := h.c.reconcile(context.Background(), "ns/web"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Target{{Cluster: "c1", Namespace: "ns", Name: "web"}}, h.svc.deleted); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
}

func TestReconcileFailedGetScale(t *testing.T) {
	a := testAutoscaler()
	a.Spec.ScaleTargetRef.Name = "missing"
	h := newHarness(t, a, scaleUp())
	if err := h.c.reconcile(context.Background(), "ns/web"); err == nil {
		t.Fatal("reconcile succeeded without a scale")
	}
	if len(h.svc.requests) != 0 {
		t.Errorf("asked the service without a scale")
	}
	c := findCondition(h.status(t).Conditions, autoscalingv2.AbleToScale)
	if c == nil || c.Reason != "FailedGetScale" {
		t.Errorf("AbleToScale = %+v", c)
	}
	if evs := strings.Join(h.drainEvents(), "\n"); !strings.Contains(evs, "Warning FailedGetScale") {
		t.Errorf("events:\n%s", evs)
	}
}

func TestSetConditionKeepsTransitionTime(t *testing.T) {
	t0, t1 := metav1.NewTime(now), metav1.NewTime(now.Add(time.Minute))
	conds := setCondition(nil, autoscalingv2.AbleToScale, corev1.ConditionTrue, "A", "a", t0)
	conds = setCondition(conds, autoscalingv2.AbleToScale, corev1.ConditionTrue, "B", "b", t1)
	if !conds[0].LastTransitionTime.Equal(&t0) || conds[0].Reason != "B" {
		t.Errorf("same status: %+v", conds[0])
	}
	conds = setCondition(conds, autoscalingv2.AbleToScale, corev1.ConditionFalse, "C", "c", t1)
	if !conds[0].LastTransitionTime.Equal(&t1) {
		t.Errorf("changed status: %+v", conds[0])
	}
}

func TestFormatTargets(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	specs := []autoscalingv2.MetricSpec{
		{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: "cpu", Target: autoscalingv2.MetricTarget{AverageUtilization: ptr.To[int32](50)}}},
		{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{Target: autoscalingv2.MetricTarget{AverageValue: q("10")}}},
		{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{Target: autoscalingv2.MetricTarget{Value: q("2k")}}},
		{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{Target: autoscalingv2.MetricTarget{Value: q("1")}}},
	}
	statuses := []autoscalingv2.MetricStatus{
		{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To[int32](45)}}},
		{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricStatus{Current: autoscalingv2.MetricValueStatus{AverageValue: q("12")}}},
		{}, // failed
	}
	want := "cpu: 45%/50%, 12/10, <unknown>/2k, + 1 more..."
	if got := formatTargets(specs, statuses); got != want {
		t.Errorf("formatTargets = %q, want %q", got, want)
	}
	if got := formatTargets(nil, nil); got != "<none>" {
		t.Errorf("no metrics: %q", got)
	}
}

// The converters round-trip: what the agent writes as unstructured reads
// back the same.
func TestUnstructuredRoundTrip(t *testing.T) {
	a := testAutoscaler()
	a.Status = v1alpha1.AutoscalerStatus{DesiredReplicas: 3, Explanation: &v1alpha1.Explanation{Summary: "s", Steps: []v1alpha1.ExplanationStep{{Kind: "Limited", From: 5, To: 4}}}}
	u, err := v1alpha1.ToUnstructured(a)
	if err != nil {
		t.Fatal(err)
	}
	if u.GetKind() != "Autoscaler" || u.GetAPIVersion() != "setpoint.dev/v1alpha1" {
		t.Errorf("gvk = %v", u.GroupVersionKind())
	}
	back, err := v1alpha1.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	var _ = unstructured.Unstructured{}
}
