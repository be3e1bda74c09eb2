package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/setpointhq/setpoint/agent"
	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	"github.com/setpointhq/setpoint/internal/kubetest/metricsserver"
)

func deploymentRef(name string) autoscalingv2.CrossVersionObjectReference {
	return autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name}
}

func cpuUtilization(pct int32) []autoscalingv2.MetricSpec {
	return []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(pct)}}}}
}

// 2 pods at 75% of their request against a 50% target: 3 replicas, and the
// status, conditions and Events read as `kubectl describe hpa` would show.
func TestCPUScaleUpDeployment(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "cpu-up")
	createDeployment(t, ns, "web", 2)
	runningPods(t, ns, "web", 2, "100m", "75m")
	createAutoscaler(t, ns, "web", v1alpha1.AutoscalerSpec{ScaleTargetRef: deploymentRef("web"), MinReplicas: ptr.To[int32](1), MaxReplicas: 10, Metrics: cpuUtilization(50)})
	startAgent(t, ns, agentConfig{})

	waitReplicas(t, ns, "web", 3, 15*time.Second)
	waitEvent(t, ns, "web", "Normal SuccessfulRescale New size: 3; reason: cpu resource utilization (percentage of request) above target")
	waitFor(t, 10*time.Second, "status after the rescale", func() (bool, string) {
		a := autoscaler(t, ns, "web")
		st := a.Status
		ok := st.DesiredReplicas == 3 && st.CurrentReplicas == 3 && st.LastScaleTime != nil &&
			st.ObservedGeneration == a.Generation && st.Reference == "Deployment/web" && st.Targets == "cpu: 75%/50%" &&
			st.Explanation != nil && st.Explanation.Winner != ""
		for _, want := range []struct {
			t autoscalingv2.HorizontalPodAutoscalerConditionType
			s corev1.ConditionStatus
		}{{autoscalingv2.AbleToScale, corev1.ConditionTrue}, {autoscalingv2.ScalingActive, corev1.ConditionTrue}, {v1alpha1.ConditionServiceAvailable, corev1.ConditionTrue}} {
			c := condition(a, want.t)
			ok = ok && c != nil && c.Status == want.s
		}
		return ok, statusText(t, ns, "web")
	})
	// The state is stable: 2 pods at 75% with 3 replicas propose 3.
	holdsReplicas(t, ns, "web", 3, 3*syncPeriod)
	t.Logf("describe:\n  %s\n  events: %s", statusText(t, ns, "web"), strings.Join(eventsOf(t, ns, "web"), "\n          "))
}

// An Autoscaler without metrics scales on 80% average cpu utilization, as
// an HPA does (the API server's default): 2 pods at 100% of their request
// propose ceil(2 × 100/80) = 3.
func TestNoMetricsScaleOnCPU(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "no-metrics")
	createDeployment(t, ns, "web", 2)
	runningPods(t, ns, "web", 2, "100m", "100m")
	createAutoscaler(t, ns, "web", v1alpha1.AutoscalerSpec{ScaleTargetRef: deploymentRef("web"), MaxReplicas: 10})
	startAgent(t, ns, agentConfig{})

	waitReplicas(t, ns, "web", 3, 15*time.Second)
	waitEvent(t, ns, "web", "Normal SuccessfulRescale New size: 3; reason: cpu resource utilization (percentage of request) above target")
	// The status shows the defaulted metric, as kubectl shows an HPA's.
	waitFor(t, 5*time.Second, "targets", func() (bool, string) {
		a := autoscaler(t, ns, "web")
		return strings.HasPrefix(a.Status.Targets, "cpu: ") && strings.HasSuffix(a.Status.Targets, "/80%"), a.Status.Targets
	})
}

// A StatefulSet scaled on a Pods metric from custom.metrics.k8s.io.
func TestStatefulSetPodsMetric(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "sts-pods")
	labels := map[string]string{"app": "db"}
	sts := fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"db","namespace":%q},
	  "spec":{"replicas":2,"serviceName":"db","selector":{"matchLabels":{"app":"db"}},
	  "template":{"metadata":{"labels":{"app":"db"}},"spec":{"containers":[{"name":"db","image":"example.invalid/db:1"}]}}}}`, ns)
	if _, err := env.kube.AppsV1().RESTClient().Post().Namespace(ns).Resource("statefulsets").Body([]byte(sts)).SetHeader("Content-Type", "application/json").DoRaw(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		name := fmt.Sprintf("db-%d", i)
		createPod(t, ns, podSpec{name: name, labels: labels, cpuRequest: "100m", ready: true, startedAgo: 10 * time.Minute, readyAgo: 9 * time.Minute})
		env.metrics.SetCustomMetric(metricsserver.CustomMetric{Resource: "pods", Namespace: ns, Name: name, Kind: "Pod", APIVersion: "v1", Labels: labels,
			Metric: "queries_per_second", Value: resource.MustParse("20")})
	}
	createAutoscaler(t, ns, "db", v1alpha1.AutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"},
		MaxReplicas:    4,
		Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "queries_per_second"},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))}}}},
	})
	startAgent(t, ns, agentConfig{})
	waitFor(t, 15*time.Second, "statefulset at 4 replicas", func() (bool, string) {
		s, err := env.kube.AppsV1().StatefulSets(ns).Get(t.Context(), "db", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return *s.Spec.Replicas == 4, fmt.Sprintf("replicas %d; %s", *s.Spec.Replicas, statusText(t, ns, "db"))
	})
	waitFor(t, 5*time.Second, "targets", func() (bool, string) {
		a := autoscaler(t, ns, "db")
		return a.Status.Targets == "20/10", a.Status.Targets
	})
}

// A custom resource with a scale subresource, on an External metric.
func TestCustomResourceExternalMetric(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "cr-external")
	res := env.dyn.Resource(widgets).Namespace(ns)
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "e2e.setpoint.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "gizmo", "namespace": ns},
		"spec":     map[string]any{"replicas": int64(1)},
	}}
	created, err := res.Create(t.Context(), w, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Object["status"] = map[string]any{"replicas": int64(1), "selector": "app=gizmo"}
	if _, err := res.UpdateStatus(t.Context(), created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.metrics.SetExternalMetric(metricsserver.ExternalMetric{Namespace: ns, Metric: "queue_messages_ready", Labels: map[string]string{"queue": "orders"}, Value: resource.MustParse("30")})
	env.metrics.SetExternalMetric(metricsserver.ExternalMetric{Namespace: ns, Metric: "queue_messages_ready", Labels: map[string]string{"queue": "billing"}, Value: resource.MustParse("500")})
	createAutoscaler(t, ns, "gizmo", v1alpha1.AutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "e2e.setpoint.dev/v1", Kind: "Widget", Name: "gizmo"},
		MaxReplicas:    10,
		Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "queue_messages_ready", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "orders"}}},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))}}}},
	})
	startAgent(t, ns, agentConfig{})
	waitFor(t, 15*time.Second, "widget at 3 replicas", func() (bool, string) {
		got, err := res.Get(t.Context(), "gizmo", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		r, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas")
		return r == 3, fmt.Sprintf("replicas %d; %s", r, statusText(t, ns, "gizmo"))
	})
	waitEvent(t, ns, "gizmo", "Normal SuccessfulRescale New size: 3; reason: external metric queue_messages_ready")
}

// A scale-down is held by the behavior's 6 s stabilization window, then
// released.
func TestScaleDownStabilization(t *testing.T) {
	t.Parallel()
	const window = 6 * time.Second
	ns := newNamespace(t, "stabilize")
	createDeployment(t, ns, "web", 4)
	runningPods(t, ns, "web", 4, "100m", "10m")
	created := time.Now()
	createAutoscaler(t, ns, "web", v1alpha1.AutoscalerSpec{
		ScaleTargetRef: deploymentRef("web"), MinReplicas: ptr.To[int32](1), MaxReplicas: 10, Metrics: cpuUtilization(50),
		Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To(int32(window / time.Second))}},
	})
	startAgent(t, ns, agentConfig{})
	waitFor(t, 10*time.Second, "ScaleDownStabilized", func() (bool, string) {
		c := condition(autoscaler(t, ns, "web"), autoscalingv2.AbleToScale)
		return c != nil && c.Reason == "ScaleDownStabilized", statusText(t, ns, "web")
	})
	if got := deploymentReplicas(t, ns, "web"); got != 4 {
		t.Fatalf("scaled down to %d inside the stabilization window", got)
	}
	waitReplicas(t, ns, "web", 1, window+10*time.Second)
	if held := time.Since(created); held < window-time.Second {
		t.Errorf("scaled down after %v, before the %v window", held, window)
	}
}

// A Pods policy of 1 pod per minute limits a scale-up that metrics want at 8.
func TestBehaviorPolicyLimitsScaleUp(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "policy")
	createDeployment(t, ns, "web", 1)
	runningPods(t, ns, "web", 1, "100m", "400m")
	createAutoscaler(t, ns, "web", v1alpha1.AutoscalerSpec{
		ScaleTargetRef: deploymentRef("web"), MaxReplicas: 10, Metrics: cpuUtilization(50),
		Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{
			Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 60}},
		}},
	})
	startAgent(t, ns, agentConfig{})
	waitReplicas(t, ns, "web", 2, 15*time.Second)
	waitFor(t, 5*time.Second, "ScalingLimited", func() (bool, string) {
		c := condition(autoscaler(t, ns, "web"), autoscalingv2.ScalingLimited)
		return c != nil && c.Status == corev1.ConditionTrue && c.Reason == "ScaleUpLimit", statusText(t, ns, "web")
	})
	holdsReplicas(t, ns, "web", 2, 3*syncPeriod)
}

// During a scale-up, unready pods (starting, with a CPU burst) count as 0%:
// one ready pod at 300% of 100m and three starting pods at 500% give 6
// replicas, not the 8 (limit) a plain average would.
func TestUnreadyPodsDuringScaleUp(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "unready")
	labels := map[string]string{"app": "web"}
	createDeployment(t, ns, "web", 4)
	createPod(t, ns, podSpec{name: "web-ready", labels: labels, cpuRequest: "100m", ready: true, startedAgo: 2 * time.Minute, readyAgo: 100 * time.Second})
	env.metrics.SetPodUsage(ns, "web-ready", labels, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("150m")})
	for i := range 3 {
		name := fmt.Sprintf("web-starting-%d", i)
		createPod(t, ns, podSpec{name: name, labels: labels, cpuRequest: "100m", ready: false, startedAgo: 20 * time.Second, readyAgo: 20 * time.Second})
		env.metrics.SetPodUsage(ns, name, labels, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")})
	}
	createAutoscaler(t, ns, "web", v1alpha1.AutoscalerSpec{ScaleTargetRef: deploymentRef("web"), MaxReplicas: 20, Metrics: cpuUtilization(50)})
	startAgent(t, ns, agentConfig{})
	// The ready pod alone is at 150% of a 50% target; with the unready
	// pods at 0% the average is 37.5%, the other direction, so the HPA
	// holds the count (a plain average, 412%, would scale up).
	waitFor(t, 15*time.Second, "a decision", func() (bool, string) {
		a := autoscaler(t, ns, "web")
		return a.Status.Explanation != nil, statusText(t, ns, "web")
	})
	holdsReplicas(t, ns, "web", 4, 3*syncPeriod)
	// More load on the ready pod: 300% → with unready at 0: 75% → 1.5 × 4 = 6.
	env.metrics.SetPodUsage(ns, "web-ready", labels, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("300m")})
	waitReplicas(t, ns, "web", 6, 15*time.Second)
}

// dryRun decides and reports in the status, and never writes the Scale.
func TestDryRun(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "dry-run")
	createDeployment(t, ns, "web", 2)
	runningPods(t, ns, "web", 2, "100m", "75m")
	createAutoscaler(t, ns, "web", v1alpha1.AutoscalerSpec{ScaleTargetRef: deploymentRef("web"), MaxReplicas: 10, Metrics: cpuUtilization(50), DryRun: true})
	startAgent(t, ns, agentConfig{})
	waitFor(t, 15*time.Second, "dry-run status", func() (bool, string) {
		a := autoscaler(t, ns, "web")
		c := condition(a, autoscalingv2.AbleToScale)
		return a.Status.DesiredReplicas == 3 && c != nil && c.Reason == "DryRun" &&
			a.Status.Explanation != nil && strings.HasPrefix(a.Status.Explanation.Summary, "dry run"), statusText(t, ns, "web")
	})
	waitEvent(t, ns, "web", "Normal DryRunRescale New size would be 3")
	holdsReplicas(t, ns, "web", 2, 3*syncPeriod)
}

// paused: no decisions (the service never hears of the target) and no
// writes; unpausing resumes.
func TestPaused(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "paused")
	createDeployment(t, ns, "web", 2)
	runningPods(t, ns, "web", 2, "100m", "75m")
	createAutoscaler(t, ns, "web", v1alpha1.AutoscalerSpec{ScaleTargetRef: deploymentRef("web"), MaxReplicas: 10, Metrics: cpuUtilization(50), Paused: true})
	startAgent(t, ns, agentConfig{})
	waitFor(t, 10*time.Second, "Paused condition", func() (bool, string) {
		c := condition(autoscaler(t, ns, "web"), v1alpha1.ConditionPaused)
		return c != nil && c.Status == corev1.ConditionTrue, statusText(t, ns, "web")
	})
	holdsReplicas(t, ns, "web", 2, 3*syncPeriod)
	if targetKnown(t, ns, "web") {
		t.Errorf("the service decided for a paused autoscaler")
	}
	updateAutoscaler(t, ns, "web", func(s *v1alpha1.AutoscalerSpec) { s.Paused = false })
	waitReplicas(t, ns, "web", 3, 10*time.Second)
	// The agent writes the status after the scale: wait for it rather than
	// reading it the moment the replicas changed.
	waitFor(t, 10*time.Second, "Paused condition removed after unpausing", func() (bool, string) {
		return condition(autoscaler(t, ns, "web"), v1alpha1.ConditionPaused) == nil, statusText(t, ns, "web")
	})
}

// The service goes down: the target is left alone and the condition says
// why; when it is back the agent recovers by itself.
func TestServiceDownThenBack(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "service-down")
	srv, err := startServer("127.0.0.1:0", filepath.Join(t.TempDir(), "setpoint.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if srv != nil {
			srv.stop()
		}
	})
	createDeployment(t, ns, "web", 2)
	runningPods(t, ns, "web", 2, "100m", "50m")
	createAutoscaler(t, ns, "web", v1alpha1.AutoscalerSpec{ScaleTargetRef: deploymentRef("web"), MaxReplicas: 10, Metrics: cpuUtilization(50)})
	startAgent(t, ns, agentConfig{addr: srv.addr})
	waitFor(t, 15*time.Second, "ServiceAvailable", func() (bool, string) {
		c := condition(autoscaler(t, ns, "web"), v1alpha1.ConditionServiceAvailable)
		return c != nil && c.Status == corev1.ConditionTrue, statusText(t, ns, "web")
	})
	addr, path := srv.addr, srv.path
	srv.stop()
	srv = nil
	// Load that would scale to 3.
	for i := range 2 {
		env.metrics.SetPodUsage(ns, fmt.Sprintf("web-%d", i), map[string]string{"app": "web"}, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("75m")})
	}
	waitFor(t, 15*time.Second, "ServiceUnavailable", func() (bool, string) {
		c := condition(autoscaler(t, ns, "web"), v1alpha1.ConditionServiceAvailable)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == v1alpha1.ReasonServiceUnavailable, statusText(t, ns, "web")
	})
	holdsReplicas(t, ns, "web", 2, 3*syncPeriod)
	if srv, err = startServer(addr, path); err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, ns, "web", 3, 20*time.Second)
	waitFor(t, 5*time.Second, "ServiceAvailable again", func() (bool, string) {
		c := condition(autoscaler(t, ns, "web"), v1alpha1.ConditionServiceAvailable)
		return c != nil && c.Status == corev1.ConditionTrue, statusText(t, ns, "web")
	})
}

// conflictingService writes the target between the agent's read of the
// Scale and its update, once, so the update conflicts.
type conflictingService struct {
	agent.Service
	ns, name string
	done     atomic.Bool
}

func (s *conflictingService) Recommend(ctx context.Context, req *agent.Request) (*agent.Recommendation, error) {
	rec, err := s.Service.Recommend(ctx, req)
	if err == nil && rec.Rescale && s.done.CompareAndSwap(false, true) {
		patch := []byte(`{"metadata":{"annotations":{"e2e.setpoint.dev/touched":"yes"}}}`)
		if _, perr := env.kube.AppsV1().Deployments(s.ns).Patch(ctx, s.name, types.MergePatchType, patch, metav1.PatchOptions{}); perr != nil {
			return nil, perr
		}
	}
	return rec, err
}

// A Scale update that conflicts is retried on a fresh read and succeeds.
func TestScaleUpdateConflict(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "conflict")
	createDeployment(t, ns, "web", 2)
	runningPods(t, ns, "web", 2, "100m", "75m")
	createAutoscaler(t, ns, "web", v1alpha1.AutoscalerSpec{ScaleTargetRef: deploymentRef("web"), MaxReplicas: 10, Metrics: cpuUtilization(50)})
	var cs *conflictingService
	startAgent(t, ns, agentConfig{wrap: func(s agent.Service) agent.Service {
		cs = &conflictingService{Service: s, ns: ns, name: "web"}
		return cs
	}})
	waitReplicas(t, ns, "web", 3, 15*time.Second)
	if !cs.done.Load() {
		t.Fatal("no conflict was provoked")
	}
	for _, e := range eventsOf(t, ns, "web") {
		if strings.Contains(e, "FailedRescale") {
			t.Errorf("the conflict surfaced: %s", e)
		}
	}
}

// Two agents with leader election: one leads and scales; when it dies the
// other takes the Lease over and carries on.
func TestLeaderElectionFailover(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "leader")
	createDeployment(t, ns, "web", 2)
	runningPods(t, ns, "web", 2, "100m", "75m")
	createAutoscaler(t, ns, "web", v1alpha1.AutoscalerSpec{ScaleTargetRef: deploymentRef("web"), MaxReplicas: 10, Metrics: cpuUtilization(50)})
	a := startLeaderAgent(t, ns, ns, "agent-a", agentConfig{})
	waitFor(t, 10*time.Second, "agent-a leading", func() (bool, string) {
		return holder(t, ns) == "agent-a", holder(t, ns)
	})
	b := startLeaderAgent(t, ns, ns, "agent-b", agentConfig{})
	waitReplicas(t, ns, "web", 3, 15*time.Second)
	a.kill()
	waitFor(t, 15*time.Second, "agent-b leading", func() (bool, string) {
		return holder(t, ns) == "agent-b", holder(t, ns)
	})
	// More load: only the new leader can act on it.
	for i := range 2 {
		env.metrics.SetPodUsage(ns, fmt.Sprintf("web-%d", i), map[string]string{"app": "web"}, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")})
	}
	waitReplicas(t, ns, "web", 4, 15*time.Second)
	b.kill()
}

func holder(t *testing.T, ns string) string {
	t.Helper()
	l, err := env.kube.CoordinationV1().Leases(ns).Get(context.Background(), "setpoint-agent", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// Deleting the Autoscaler deletes the target in the service.
func TestDeleteForgetsTarget(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "delete")
	createDeployment(t, ns, "web", 2)
	runningPods(t, ns, "web", 2, "100m", "50m")
	createAutoscaler(t, ns, "web", v1alpha1.AutoscalerSpec{ScaleTargetRef: deploymentRef("web"), MaxReplicas: 10, Metrics: cpuUtilization(50)})
	startAgent(t, ns, agentConfig{})
	waitFor(t, 10*time.Second, "target known to the service", func() (bool, string) { return targetKnown(t, ns, "web"), "" })
	if err := env.dyn.Resource(v1alpha1.AutoscalerResource).Namespace(ns).Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "target forgotten", func() (bool, string) { return !targetKnown(t, ns, "web"), "" })
}

// A spec the service rejects (minReplicas 0 without an Object or External
// metric) gets ServiceAvailable=False/InvalidSpec with the field violation
// and a Warning Event; the target is left alone.
func TestInvalidSpec(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "invalid")
	createDeployment(t, ns, "web", 2)
	runningPods(t, ns, "web", 2, "100m", "75m")
	createAutoscaler(t, ns, "web", v1alpha1.AutoscalerSpec{ScaleTargetRef: deploymentRef("web"), MinReplicas: ptr.To[int32](0), MaxReplicas: 10, Metrics: cpuUtilization(50)})
	startAgent(t, ns, agentConfig{})
	waitFor(t, 10*time.Second, "InvalidSpec", func() (bool, string) {
		c := condition(autoscaler(t, ns, "web"), v1alpha1.ConditionServiceAvailable)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == v1alpha1.ReasonInvalidSpec && strings.Contains(c.Message, "min_replicas"), statusText(t, ns, "web")
	})
	waitEvent(t, ns, "web", "Warning InvalidSpec the Setpoint service rejected the request: spec.min_replicas")
	holdsReplicas(t, ns, "web", 2, 2*syncPeriod)
}
