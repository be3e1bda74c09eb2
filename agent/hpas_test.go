package agent

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	"github.com/setpointhq/setpoint/internal/testkit"
)

// hpaHarness is a Controller serving HPAs over fakes: the typed clientset
// holds the HPA, the fakes the scale and the service.
type hpaHarness struct {
	c          *Controller
	kube       *kubefake.Clientset
	svc        *fakeService
	scales     *fakeScales
	hpaEvents  *record.FakeRecorder
	autoEvents *record.FakeRecorder
}

func testHPA() *autoscalingv2.HorizontalPodAutoscaler {
	a := testAutoscaler()
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Generation: 3, ResourceVersion: "10"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: a.Spec.ScaleTargetRef, MinReplicas: a.Spec.MinReplicas, MaxReplicas: a.Spec.MaxReplicas,
			Metrics: a.Spec.Metrics[:1],
		},
	}
}

func newHPAHarness(t *testing.T, h *autoscalingv2.HorizontalPodAutoscaler, rec *Recommendation, serve Serve) *hpaHarness {
	t.Helper()
	hh := &hpaHarness{
		kube:       kubefake.NewClientset(h),
		svc:        &fakeService{rec: rec},
		scales:     &fakeScales{scales: map[string]*autoscalingv1.Scale{}},
		hpaEvents:  record.NewFakeRecorder(100),
		autoEvents: record.NewFakeRecorder(100),
	}
	hh.scales.scales["ns/web"] = &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: "1"},
		Spec:       autoscalingv1.ScaleSpec{Replicas: 2},
		Status:     autoscalingv1.ScaleStatus{Replicas: 2, Selector: "app=web"},
	}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "apps", Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	c, err := New(Options{
		Kube:      hh.kube,
		Dynamic:   dyn,
		Informers: callerInformers(serve, hh.kube, dyn),
		Scales:    hh.scales,
		Mapper:    mapper,
		Service:   hh.svc,
		Events:    hh.autoEvents,
		HPAEvents: hh.hpaEvents,
		Serve:     serve,
		Cluster:   "c1",
		// A window of 2 periods: 30 s.
		SyncPeriod:      15 * time.Second,
		StandDownWindow: 30 * time.Second,
		Clock:           clocktesting.NewFakePassiveClock(now),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.queue.ShutDown)
	cached, err := trimHPA(h.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.hpas.GetIndexer().Add(cached); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", Labels: map[string]string{"app": "web"}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if err := c.podIndex.Add(pod); err != nil {
		t.Fatal(err)
	}
	hh.c = c
	return hh
}

// hpa reads the HPA as stored.
func (hh *hpaHarness) hpa(t *testing.T) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	h, err := hh.kube.AutoscalingV2().HorizontalPodAutoscalers("ns").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func drain(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// writes lists the verbs and subresources of the requests that wrote the
// HPA, each with its field manager.
func (hh *hpaHarness) writes() []string {
	var out []string
	for _, a := range hh.kube.Actions() {
		if a.GetResource().Resource != "horizontalpodautoscalers" {
			continue
		}
		switch w := a.(type) {
		case clienttesting.UpdateActionImpl:
			// The cached managed fields have no field sets: sending them
			// would replace the stored ones.
			if h, ok := w.Object.(*autoscalingv2.HorizontalPodAutoscaler); ok && h.ManagedFields != nil {
				out = append(out, "update with managed fields")
			}
			out = append(out, "update "+w.GetSubresource()+" by "+w.UpdateOptions.FieldManager)
		case clienttesting.PatchActionImpl:
			out = append(out, "patch "+w.GetSubresource()+" by "+w.PatchOptions.FieldManager)
		}
	}
	return out
}

func TestHPAServed(t *testing.T) {
	hh := newHPAHarness(t, testHPA(), scaleUp(), ServeHPAs)
	if err := hh.c.reconcile(context.Background(), "hpa:ns/web"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if got := hh.scales.scales["ns/web"].Spec.Replicas; got != 4 {
		t.Errorf("scale replicas = %d, want 4", got)
	}
	if diff := cmp.Diff(Target{Cluster: "c1", Namespace: "ns", Name: "hpa:web"}, hh.svc.requests[0].Target); diff != "" {
		t.Errorf("service target (-want +got):\n%s", diff)
	}
	h := hh.hpa(t)
	st := h.Status
	if st.CurrentReplicas != 2 || st.DesiredReplicas != 4 || st.LastScaleTime == nil || st.ObservedGeneration == nil || *st.ObservedGeneration != 3 {
		t.Errorf("status = %+v", st)
	}
	var types []string
	for _, c := range st.Conditions {
		types = append(types, string(c.Type)+"="+string(c.Status)+"/"+c.Reason)
	}
	// Only the HPA's conditions: the agent's ServiceAvailable=True is not
	// written on an HPA.
	if diff := cmp.Diff([]string{"AbleToScale=True/SucceededRescale"}, types); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	if got := h.Annotations[DecisionAnnotation]; got != "d1" {
		t.Errorf("annotation %s = %q, want d1", DecisionAnnotation, got)
	}
	if got := h.Annotations[ExplanationAnnotation]; got != "setpointctl explain c1/ns/hpa:web" {
		t.Errorf("annotation %s = %q", ExplanationAnnotation, got)
	}
	if diff := cmp.Diff([]string{"update status by " + FieldManager, "patch  by " + FieldManager}, hh.writes()); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	evs := drain(hh.hpaEvents)
	if diff := cmp.Diff([]string{"Normal SuccessfulRescale New size: 4; reason: cpu resource utilization (percentage of request) above target"}, evs); diff != "" {
		t.Errorf("HPA events (-want +got):\n%s", diff)
	}
	if evs := drain(hh.autoEvents); len(evs) != 0 {
		t.Errorf("Events through the Autoscaler recorder: %v", evs)
	}
}

func TestHPAExplanationLinksConsole(t *testing.T) {
	c := &Controller{opts: Options{ConsoleURL: "https://setpoint.example.com/console/"}}
	got := c.explanationLink(Target{Cluster: "prod", Namespace: "shop", Name: "hpa:web"})
	if want := "https://setpoint.example.com/console/#/t/prod/shop/hpa:web"; got != want {
		t.Errorf("link = %q, want %q", got, want)
	}
}

// An agent that serves Autoscalers only has no HPA cache; one that serves
// HPAs only, no Autoscaler cache; and the caches are the caller's
// informers.
func TestServeSelectsCaches(t *testing.T) {
	for _, tc := range []struct {
		serve             Serve
		autoscalers, hpas bool
	}{
		{ServeAutoscalers, true, false},
		{ServeHPAs, false, true},
		{ServeBoth, true, true},
	} {
		t.Run(string(tc.serve), func(t *testing.T) {
			kube, dyn := kubefake.NewClientset(), dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
			inf := callerInformers(tc.serve, kube, dyn)
			c, err := New(Options{Kube: kube, Dynamic: dyn, Informers: inf,
				Scales: &fakeScales{}, Mapper: meta.NewDefaultRESTMapper(nil), Service: &fakeService{}, Serve: tc.serve})
			if err != nil {
				t.Fatal(err)
			}
			defer c.queue.ShutDown()
			if (c.autoscalers != nil) != tc.autoscalers || (c.hpas != nil) != tc.hpas {
				t.Errorf("autoscaler cache %v, HPA cache %v", c.autoscalers != nil, c.hpas != nil)
			}
			if tc.autoscalers && c.autoscalers.GetIndexer() != inf.Autoscalers.Informer().GetIndexer() {
				t.Error("the Autoscaler cache is not the caller's informer")
			}
			if tc.hpas && c.hpas.GetIndexer() != inf.HPAs.Informer().GetIndexer() {
				t.Error("the HPA cache is not the caller's informer")
			}
			if c.podIndex != inf.Pods.Informer().GetIndexer() {
				t.Error("the pod cache is not the caller's informer")
			}
		})
	}
	kube, dyn := kubefake.NewClientset(), dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	if _, err := New(Options{Kube: kube, Dynamic: dyn, Informers: callerInformers(ServeBoth, kube, dyn),
		Scales: &fakeScales{}, Mapper: meta.NewDefaultRESTMapper(nil), Service: &fakeService{}, Serve: "deployments"}); err == nil {
		t.Error("New accepted Serve \"deployments\"")
	}
}

// New refuses informers that cannot serve it: missing ones for a kind
// served, and started ones (its transforms and indexers must come first).
func TestNewRefusesInformers(t *testing.T) {
	kube, dyn := kubefake.NewClientset(), dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	opts := func(serve Serve, inf Informers) Options {
		return Options{Kube: kube, Dynamic: dyn, Informers: inf, Serve: serve,
			Scales: &fakeScales{}, Mapper: meta.NewDefaultRESTMapper(nil), Service: &fakeService{}}
	}
	for _, tc := range []struct {
		name  string
		serve Serve
		inf   Informers
	}{
		{"none", ServeAutoscalers, Informers{}},
		{"no Autoscaler informer", ServeBoth, callerInformers(ServeHPAs, kube, dyn)},
		{"no HPA informer", ServeBoth, callerInformers(ServeAutoscalers, kube, dyn)},
	} {
		if c, err := New(opts(tc.serve, tc.inf)); err == nil {
			c.queue.ShutDown()
			t.Errorf("%s: New accepted the informers", tc.name)
		}
	}

	factory := informers.NewSharedInformerFactory(kube, 0)
	inf := InformersFrom(ServeHPAs, factory, dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0))
	// Informers are requested lazily: these two are, so Start starts them.
	inf.Pods.Informer()
	inf.HPAs.Informer()
	ctx, cancel := context.WithCancel(t.Context())
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	factory.WaitForCacheSync(ctx.Done())
	if c, err := New(opts(ServeHPAs, inf)); err == nil {
		c.queue.ShutDown()
		t.Error("New accepted informers already started")
	}
}

// The caller's informers feed the controller: started after New, they
// fill its caches and queue the autoscalers they list, and Run reconciles
// them; the caller shuts them down after Run returns.
func TestRunReadsCallersInformers(t *testing.T) {
	hpa := testHPA()
	kube := kubefake.NewClientset(hpa, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", Labels: map[string]string{"app": "web"}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	})
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	svc := &fakeService{rec: &Recommendation{DecisionID: "d1", DesiredReplicas: 2}}
	scales := &fakeScales{scales: map[string]*autoscalingv1.Scale{"ns/web": {
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: "1"},
		Spec:       autoscalingv1.ScaleSpec{Replicas: 2},
		Status:     autoscalingv1.ScaleStatus{Replicas: 2, Selector: "app=web"},
	}}}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "apps", Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	factory := informers.NewSharedInformerFactory(kube, 0)
	dynFactory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	c, err := New(Options{Kube: kube, Dynamic: dyn, Informers: InformersFrom(ServeHPAs, factory, dynFactory), Serve: ServeHPAs,
		Scales: scales, Mapper: mapper, Service: svc, Cluster: "c1", Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	factory.Start(ctx.Done())
	dynFactory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		factory.Shutdown()
		dynFactory.Shutdown()
	}()
	testkit.Eventually(t, 10*time.Second, "a Recommend call for the HPA the caller's informer lists", func() error {
		svc.mu.Lock()
		defer svc.mu.Unlock()
		if len(svc.requests) == 0 {
			return errors.New("no call yet")
		}
		return nil
	})
	if !c.Synced() {
		t.Error("a reconcile ran before the caches synced")
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if got := svc.requests[0]; got.Target.Name != "hpa:web" || len(got.Pods) != 1 {
		t.Errorf("request for %q with %d pods, want hpa:web with web-1 from the caller's pod informer", got.Target.Name, len(got.Pods))
	}
}

func statusEntry(manager string, at time.Time) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: ptr.To(metav1.NewTime(at))}
}

func TestOtherStatusWriter(t *testing.T) {
	window := 30 * time.Second
	for _, tc := range []struct {
		name   string
		fields []metav1.ManagedFieldsEntry
		want   string
	}{
		{name: "none"},
		{name: "ours only", fields: []metav1.ManagedFieldsEntry{statusEntry(FieldManager, now.Add(-time.Second))}},
		{name: "another, recently", fields: []metav1.ManagedFieldsEntry{statusEntry(FieldManager, now.Add(-time.Second)), statusEntry("kube-controller-manager", now.Add(-10*time.Second))},
			want: "kube-controller-manager"},
		{name: "another, long ago", fields: []metav1.ManagedFieldsEntry{statusEntry("kube-controller-manager", now.Add(-time.Hour))}},
		{name: "the latest of two", fields: []metav1.ManagedFieldsEntry{statusEntry("keda", now.Add(-20*time.Second)), statusEntry("kube-controller-manager", now.Add(-10*time.Second))},
			want: "kube-controller-manager"},
		{name: "the spec, not the status", fields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, Time: ptr.To(metav1.NewTime(now))}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, ok := otherStatusWriter(tc.fields, now, window)
			if got != tc.want || ok != (tc.want != "") {
				t.Errorf("otherStatusWriter = %q, %v; want %q", got, ok, tc.want)
			}
		})
	}
}

// While another controller writes the HPA's status the agent neither
// decides nor scales, and says so once: a condition, a Warning Event and a
// series. Once that controller is quiet for the window, the agent serves
// the HPA and removes the condition.
func TestHPAStandsDown(t *testing.T) {
	h := testHPA()
	h.ManagedFields = []metav1.ManagedFieldsEntry{statusEntry("kube-controller-manager", now.Add(-5*time.Second))}
	hh := newHPAHarness(t, h, scaleUp(), ServeHPAs)
	if err := hh.c.reconcile(context.Background(), "hpa:ns/web"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if len(hh.svc.requests) != 0 || hh.scales.updates != 0 {
		t.Fatalf("stood down, yet %d requests and %d scale updates", len(hh.svc.requests), hh.scales.updates)
	}
	stored := hh.hpa(t)
	c := findCondition(stored.Status.Conditions, ConditionStandingDown)
	if c == nil || c.Status != corev1.ConditionTrue || c.Reason != ReasonAnotherController || !strings.Contains(c.Message, `"kube-controller-manager"`) {
		t.Fatalf("condition %s = %+v", ConditionStandingDown, c)
	}
	if diff := cmp.Diff([]string{"update status by " + FieldManager}, hh.writes()); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	evs := drain(hh.hpaEvents)
	if len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning AnotherController the status of this HorizontalPodAutoscaler is written by \"kube-controller-manager\"") {
		t.Errorf("events = %q", evs)
	}

	// Still standing down, the condition already set: no second Event.
	stored.ManagedFields = h.ManagedFields
	if err := hh.c.hpas.GetIndexer().Update(stored); err != nil {
		t.Fatal(err)
	}
	if err := hh.c.reconcile(context.Background(), "hpa:ns/web"); err != nil {
		t.Fatal(err)
	}
	if evs := drain(hh.hpaEvents); len(evs) != 0 {
		t.Errorf("a second Event while standing down: %q", evs)
	}

	// The other controller has been quiet for longer than the window.
	stored.ManagedFields = []metav1.ManagedFieldsEntry{statusEntry("kube-controller-manager", now.Add(-time.Minute))}
	if err := hh.c.hpas.GetIndexer().Update(stored); err != nil {
		t.Fatal(err)
	}
	if err := hh.c.reconcile(context.Background(), "hpa:ns/web"); err != nil {
		t.Fatal(err)
	}
	if hh.scales.scales["ns/web"].Spec.Replicas != 4 {
		t.Errorf("not served after the other controller went quiet: replicas %d", hh.scales.scales["ns/web"].Spec.Replicas)
	}
	if c := findCondition(hh.hpa(t).Status.Conditions, ConditionStandingDown); c != nil {
		t.Errorf("condition %s still set: %+v", ConditionStandingDown, c)
	}
}

func TestComputesMetrics(t *testing.T) {
	scaledToZero := v1alpha1.AutoscalerStatus{Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.ScaledToZero, Status: corev1.ConditionTrue}}}
	external := []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType}}
	for _, tc := range []struct {
		name    string
		min     *int32
		metrics []autoscalingv2.MetricSpec
		st      v1alpha1.AutoscalerStatus
		current int32
		want    bool
	}{
		{name: "within range", current: 3, want: true},
		{name: "above max", current: 11},
		{name: "below min", min: ptr.To[int32](4), current: 3},
		{name: "below the default min", current: 0},
		{name: "zero, scaled there by hand", min: ptr.To[int32](0), metrics: external, current: 0},
		{name: "zero, scaled there by the autoscaler", min: ptr.To[int32](0), metrics: external, st: scaledToZero, current: 0, want: true},
		{name: "zero, min raised since", min: ptr.To[int32](2), st: scaledToZero, current: 0, want: true},
		{name: "zero, no object or external metric", min: ptr.To[int32](0), st: scaledToZero, current: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &v1alpha1.AutoscalerSpec{MinReplicas: tc.min, MaxReplicas: 10, Metrics: tc.metrics}
			if got := computesMetrics(spec, &tc.st, tc.current); got != tc.want {
				t.Errorf("computesMetrics = %v, want %v", got, tc.want)
			}
		})
	}
}

// A target whose scale has no selector: the controller's SelectorRequired
// Event, and the HPA's selector is not recorded as selecting everything.
func TestHPASelectorRequired(t *testing.T) {
	rec := &Recommendation{DecisionID: "d1", DesiredReplicas: 2, Error: computeFailedPrefix + "selector is required"}
	hh := newHPAHarness(t, testHPA(), rec, ServeHPAs)
	hh.scales.scales["ns/web"].Status.Selector = ""
	_ = hh.c.reconcile(context.Background(), "hpa:ns/web")
	evs := drain(hh.hpaEvents)
	want := []string{"Warning SelectorRequired selector is required", "Warning FailedComputeMetricsReplicas selector is required"}
	if diff := cmp.Diff(want, evs); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if sel := hh.c.selectors["hpa:ns/web"]; sel != nil && !sel.Empty() {
		t.Errorf("recorded selector %v", sel)
	}
}

// The recorders combine similar Events as the HPA controller's do: after
// ten Events of one reason about one object with different messages, the
// next ones are one "(combined from similar events): …" Event.
func TestEventRecordersCombineSimilarEvents(t *testing.T) {
	kube := kubefake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := StartEventRecorders(ctx, kube)
	defer rec.Stop()
	h := testHPA()
	h.UID = "u1"
	for i := range 12 {
		rec.HPAs.Eventf(h, corev1.EventTypeNormal, "SuccessfulRescale", "New size: %d; reason: All metrics below target", 20-i)
	}
	var list *corev1.EventList
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		list, err = kube.CoreV1().Events("ns").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		combined := false
		for _, e := range list.Items {
			combined = combined || strings.HasPrefix(e.Message, "(combined from similar events): New size: ")
		}
		if combined {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no combined Event among %d", len(list.Items))
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, e := range list.Items {
		if e.Source.Component != HPAEventComponent || e.InvolvedObject.Kind != "HorizontalPodAutoscaler" {
			t.Errorf("event from %q about %q", e.Source.Component, e.InvolvedObject.Kind)
		}
	}
}

// While the service does not answer, the HPA says why it is not served
// (ServiceAvailable=False), and the target is left alone; once it answers,
// the condition goes: an HPA served normally carries none of the agent's.
func TestHPAServiceUnavailable(t *testing.T) {
	hh := newHPAHarness(t, testHPA(), scaleUp(), ServeHPAs)
	hh.svc.err = status.Error(codes.Unavailable, "connection refused")
	if err := hh.c.reconcile(context.Background(), "hpa:ns/web"); err == nil {
		t.Fatal("reconcile succeeded with the service down")
	}
	h := hh.hpa(t)
	if c := findCondition(h.Status.Conditions, v1alpha1.ConditionServiceAvailable); c == nil || c.Status != corev1.ConditionFalse || c.Reason != v1alpha1.ReasonServiceUnavailable {
		t.Fatalf("ServiceAvailable = %+v", c)
	}
	if hh.scales.updates != 0 {
		t.Errorf("%d scale updates with the service down", hh.scales.updates)
	}

	hh.svc.err = nil
	cached, _ := trimHPA(h)
	if err := hh.c.hpas.GetIndexer().Update(cached); err != nil {
		t.Fatal(err)
	}
	if err := hh.c.reconcile(context.Background(), "hpa:ns/web"); err != nil {
		t.Fatal(err)
	}
	if c := findCondition(hh.hpa(t).Status.Conditions, v1alpha1.ConditionServiceAvailable); c != nil {
		t.Errorf("ServiceAvailable still on the HPA: %+v", c)
	}
}

// Standing down, the agent never writes over the other controller's
// status: when that controller wrote since the agent's read (a conflict),
// the condition goes onto its status as it now is; and once set, the
// condition is not written again while the other controller goes on.
func TestHPAStandDownKeepsTheOtherStatus(t *testing.T) {
	h := testHPA()
	h.ManagedFields = []metav1.ManagedFieldsEntry{statusEntry("kube-controller-manager", now.Add(-5*time.Second))}
	hh := newHPAHarness(t, h, scaleUp(), ServeHPAs)
	// The other controller writes after the agent's cache was filled: the
	// agent's first write conflicts (the fake does not compare resource
	// versions; a reactor does, once).
	newer := hh.hpa(t)
	newer.Status.DesiredReplicas = 9
	if _, err := hh.kube.AutoscalingV2().HorizontalPodAutoscalers("ns").UpdateStatus(context.Background(), newer, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	conflicted := false
	hh.kube.PrependReactor("update", "horizontalpodautoscalers", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" || conflicted {
			return false, nil, nil
		}
		conflicted = true
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "autoscaling", Resource: "horizontalpodautoscalers"}, "web", errors.New("the object has been modified"))
	})
	hh.kube.ClearActions()
	if err := hh.c.reconcile(context.Background(), "hpa:ns/web"); err != nil {
		t.Fatal(err)
	}
	stored := hh.hpa(t)
	if !conflicted || stored.Status.DesiredReplicas != 9 || findCondition(stored.Status.Conditions, ConditionStandingDown) == nil {
		t.Fatalf("status = %s", hpaStatusText(stored))
	}

	// The other controller writes again; the condition stays as it is.
	// (The fake keeps managed fields of its own: the cache gets the
	// entry the API server would have.)
	stored.Status.DesiredReplicas = 8
	if _, err := hh.kube.AutoscalingV2().HorizontalPodAutoscalers("ns").UpdateStatus(context.Background(), stored, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stored = hh.hpa(t)
	stored.ManagedFields = []metav1.ManagedFieldsEntry{statusEntry("kube-controller-manager", now.Add(-time.Second))}
	cached, _ := trimHPA(stored.DeepCopy())
	if err := hh.c.hpas.GetIndexer().Update(cached); err != nil {
		t.Fatal(err)
	}
	hh.kube.ClearActions()
	if err := hh.c.reconcile(context.Background(), "hpa:ns/web"); err != nil {
		t.Fatal(err)
	}
	if w := hh.writes(); len(w) != 0 {
		t.Errorf("writes while still standing down: %v", w)
	}
}

func hpaStatusText(h *autoscalingv2.HorizontalPodAutoscaler) string {
	var b strings.Builder
	b.WriteString("desired=" + strconv.Itoa(int(h.Status.DesiredReplicas)))
	for _, c := range h.Status.Conditions {
		b.WriteString(" " + string(c.Type) + "=" + string(c.Status) + "/" + c.Reason)
	}
	return b.String()
}
