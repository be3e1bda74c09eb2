package agent

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/testing/protocmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/flowcontrol"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	"github.com/setpointhq/setpoint/hpa"
)

func TestNextSync(t *testing.T) {
	const period = 15 * time.Second
	base := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		key  string
		at   time.Duration // after base
	}{
		{"first visit", "ns/a", 0},
		{"later", "ns/a", 7 * time.Second},
		{"other key", "ns/b", 3 * time.Second},
		{"just before a period edge", "ns/c", period - time.Nanosecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := base.Add(tt.at)
			d := nextSync(tt.key, now, period)
			if d < period/2 || d >= period*3/2 {
				t.Fatalf("nextSync = %v, want in [%v, %v)", d, period/2, period*3/2)
			}
			// On time at the due instant, the next one is one period on.
			if d2 := nextSync(tt.key, now.Add(d), period); d2 != period {
				t.Errorf("reconciled on time: next in %v, want %v", d2, period)
			}
			// Late by a quarter period, the key keeps its phase.
			if d3 := nextSync(tt.key, now.Add(d+period/4), period); d3 != period*3/4 {
				t.Errorf("reconciled late: next in %v, want %v", d3, period*3/4)
			}
		})
	}
}

// TestNextSyncSpreads checks that 10,000 keys due in the same period are
// spread over it: no tenth of the period holds more than 12% of them.
func TestNextSyncSpreads(t *testing.T) {
	const (
		period = 15 * time.Second
		keys   = 10000
	)
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var slots [10]int
	for i := range keys {
		d := nextSync("ns/autoscaler-"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+time.Duration(i).String(), now, period)
		slots[int((d-period/2)*10/period)]++
	}
	sort.Ints(slots[:])
	if slots[9] > keys*12/100 || slots[0] < keys*8/100 {
		t.Errorf("keys per tenth of the period = %v, want each within 8–12%% of %d", slots, keys)
	}
}

// TestReconcileUnchangedWritesNoStatus reconciles twice with the same
// decision at clock times with sub-second parts: the second reconcile,
// reading the status as the API server stored it (whole seconds), writes
// nothing.
func TestReconcileUnchangedWritesNoStatus(t *testing.T) {
	rec := scaleUp()
	rec.Rescale, rec.DesiredReplicas = false, 2
	// The service stamps the time a condition changed, to the nanosecond.
	rec.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-time.Minute + 500*time.Millisecond))
	h := newHarness(t, testAutoscaler(), rec)
	h.c.opts.Clock = clocktesting.NewFakePassiveClock(now.Add(123456789 * time.Nanosecond))
	if err := h.c.reconcile(context.Background(), "ns/web"); err != nil {
		t.Fatal(err)
	}
	writes := func() int {
		n := 0
		for _, a := range h.dyn.Actions() {
			if a.GetVerb() == "update" && a.GetSubresource() == "status" {
				n++
			}
		}
		return n
	}
	if writes() != 1 {
		t.Fatalf("first reconcile wrote the status %d times, want 1", writes())
	}
	// The informer delivers the stored object.
	u, err := h.dyn.Resource(v1alpha1.AutoscalerResource).Namespace("ns").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := v1alpha1.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	// As the API server keeps it: RFC 3339.
	for i := range stored.Status.Conditions {
		stored.Status.Conditions[i].LastTransitionTime = metav1.NewTime(stored.Status.Conditions[i].LastTransitionTime.Truncate(time.Second))
	}
	if err := h.c.autoscalers.GetIndexer().Update(stored); err != nil {
		t.Fatal(err)
	}
	h.c.opts.Clock = clocktesting.NewFakePassiveClock(now.Add(15*time.Second + 987654321*time.Nanosecond))
	if err := h.c.reconcile(context.Background(), "ns/web"); err != nil {
		t.Fatal(err)
	}
	if writes() != 1 {
		t.Errorf("an unchanged reconcile wrote the status (%d writes in all, want 1)", writes())
	}
}

func TestAtAPIPrecision(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 999999999, time.UTC)
	s := v1alpha1.AutoscalerStatus{
		LastScaleTime: &metav1.Time{Time: at},
		Conditions:    []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}},
	}
	atAPIPrecision(&s)
	want := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	if !s.LastScaleTime.Time.Equal(want) || !s.Conditions[0].LastTransitionTime.Time.Equal(want) {
		t.Errorf("times = %v, %v; want %v", s.LastScaleTime, s.Conditions[0].LastTransitionTime, want)
	}
}

// TestMetricsSeriesFollowDecisions checks that a decision's per-target
// series replace the previous decision's and that deletion leaves none.
func TestMetricsSeriesFollowDecisions(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	specs := testAutoscaler().Spec.Metrics
	m.present("ns", "web")
	m.present("ns", "other")
	first := scaleUp()
	first.Metrics = []MetricProposal{{Proposal: 5}, {Proposal: 3}}
	first.Explanation.Steps = []v1alpha1.ExplanationStep{{Kind: "Limited", Reason: "ScaleUpLimit"}}
	m.decided("ns", "web", specs, 2, first, nil)
	m.decided("ns", "other", specs, 2, first, nil)
	second := scaleUp()
	second.Metrics = []MetricProposal{{Proposal: 4}, {Failed: true}}
	second.Explanation.Steps = []v1alpha1.ExplanationStep{{Kind: "Stabilized", Reason: "ScaleUpStabilized"}}
	m.decided("ns", "web", specs, 2, second, nil)

	series := func(hpa string) []string {
		var out []string
		for name := range samples(t, reg) {
			if strings.Contains(name, `hpa_name="`+hpa+`"`) {
				out = append(out, name)
			}
		}
		sort.Strings(out)
		return out
	}
	want := []string{
		`setpoint_agent_decision_limited{hpa_name="web",kind="Stabilized",namespace="ns",reason="ScaleUpStabilized"}`,
		`setpoint_agent_desired_replicas{hpa_name="web",namespace="ns"}`,
		`setpoint_agent_metric_proposed_replicas{hpa_name="web",metric="cpu",metric_index="0",metric_type="Resource",namespace="ns"}`,
	}
	if diff := cmp.Diff(want, series("web")); diff != "" {
		t.Errorf("series of web after two decisions (-want +got):\n%s", diff)
	}
	m.gone("ns", "web")
	if got := series("web"); len(got) != 0 {
		t.Errorf("series left after deletion: %v", got)
	}
	if got := series("other"); len(got) != 4 {
		t.Errorf("another target's series = %v, want its 4", got)
	}
}

// TestTypedAutoscalerCache checks the cache's transform: typed objects
// without managed fields.
func TestTypedAutoscalerCache(t *testing.T) {
	a := testAutoscaler()
	a.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}}
	u, err := v1alpha1.ToUnstructured(a)
	if err != nil {
		t.Fatal(err)
	}
	got, err := typedAutoscaler(u)
	if err != nil {
		t.Fatal(err)
	}
	typed, ok := got.(*v1alpha1.Autoscaler)
	if !ok {
		t.Fatalf("cached %T, want *v1alpha1.Autoscaler", got)
	}
	want := testAutoscaler()
	if diff := cmp.Diff(want, typed); diff != "" {
		t.Errorf("cached object (-want +got):\n%s", diff)
	}
}

// TestStopTakesNoKey checks that once the controller's context is done a
// worker takes no further key: no reconcile, no call, no error.
func TestStopTakesNoKey(t *testing.T) {
	h := newHarness(t, testAutoscaler(), scaleUp())
	h.c.queue.Add("ns/web")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if h.c.processNextItem(ctx, context.Background()) {
		t.Error("processNextItem went on after the context ended")
	}
	h.svc.mu.Lock()
	calls := len(h.svc.requests)
	h.svc.mu.Unlock()
	if calls != 0 || len(h.drainEvents()) != 0 {
		t.Errorf("a stopped worker reconciled: %d calls", calls)
	}
}

// TestLoggedLimiterCountsWaits checks the shared client limit records the
// time requests wait for it.
func TestLoggedLimiterCountsWaits(t *testing.T) {
	reg := prometheus.NewRegistry()
	l := &loggedLimiter{RateLimiter: flowcontrol.NewTokenBucketRateLimiter(20, 1), burst: 1, prometheus: NewMetrics(reg)}
	for range 3 {
		if err := l.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := samples(t, reg)[`setpoint_agent_kube_client_throttled_seconds_total{}`]; got <= 0 {
		t.Errorf("throttled seconds = %v after 3 requests at 20/s with burst 1, want > 0", got)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.logged.IsZero() {
		t.Error("no log line for requests the limit delayed")
	}
}

// TestTrimPodKeepsRequest checks the pod cache keeps everything the
// request carries of a pod.
func TestTrimPodKeepsRequest(t *testing.T) {
	started := metav1.NewTime(now.Add(-time.Hour))
	always := corev1.ContainerRestartPolicyAlways
	cpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
	full := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "web-1", Labels: map[string]string{"app": "web"},
			Annotations:       map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 1000)},
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
			DeletionTimestamp: &started,
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "app:1", Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
				Resources: corev1.ResourceRequirements{Requests: cpu, Limits: cpu}}},
			InitContainers: []corev1.Container{
				{Name: "proxy", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: cpu}},
				{Name: "init", Resources: corev1.ResourceRequirements{Requests: cpu}},
			},
			Overhead:  cpu,
			Resources: &corev1.ResourceRequirements{Requests: cpu},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, StartTime: &started,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: started}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "app:1"}},
		},
	}
	trimmed, err := trimPod(full)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(hpa.Pod(full), hpa.Pod(trimmed.(*corev1.Pod)), protocmp.Transform()); diff != "" {
		t.Errorf("request pod from the trimmed cache (-full +trimmed):\n%s", diff)
	}
}

// TestPodsForMatchesLister checks the label index finds the same pods as
// a scan of the namespace, for selectors it serves and those it does not.
func TestPodsForMatchesLister(t *testing.T) {
	h := newHarness(t, testAutoscaler(), scaleUp())
	for i, l := range []map[string]string{
		{"app": "web", "tier": "front"},
		{"app": "web", "tier": "back"},
		{"app": "api"},
		{},
	} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p" + string(rune('a'+i)), Labels: l}}
		if err := h.c.podIndex.Add(p); err != nil {
			t.Fatal(err)
		}
		other := p.DeepCopy()
		other.Namespace = "other"
		if err := h.c.podIndex.Add(other); err != nil {
			t.Fatal(err)
		}
	}
	for _, sel := range []string{"app=web", "app==web,tier=front", "app in (web,api)", "app=web,tier!=front", "tier", "app notin (web)", "app=none", ""} {
		t.Run(sel, func(t *testing.T) {
			selector, err := labels.Parse(sel)
			if err != nil {
				t.Fatal(err)
			}
			want, err := h.c.pods.Pods("ns").List(selector)
			if err != nil {
				t.Fatal(err)
			}
			got, err := h.c.podsFor("ns", selector)
			if err != nil {
				t.Fatal(err)
			}
			names := func(ps []*corev1.Pod) []string {
				var out []string
				for _, p := range ps {
					out = append(out, p.Namespace+"/"+p.Name)
				}
				sort.Strings(out)
				return out
			}
			if diff := cmp.Diff(names(want), names(got)); diff != "" {
				t.Errorf("podsFor(%q) (-lister +index):\n%s", sel, diff)
			}
		})
	}
}
