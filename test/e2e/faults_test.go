package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/setpointhq/setpoint/agent"
	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	"github.com/setpointhq/setpoint/internal/kubetest/metricsserver"
	"github.com/setpointhq/setpoint/internal/servertest"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
)

// The faults around the agent (issue 7): each case breaks one thing the
// agent depends on while the load asks for a change, checks that the target
// is left alone and that the Autoscaler says why (condition and Event), then
// repairs it and checks that the same agent recovers by itself.

// Modes of a faultyStore.
const (
	storeOK int32 = iota
	storeSlow
	storeFailing
)

// faultyStore wraps the Setpoint server's real store: slow (every Update and
// Decide waits past the agent's 2 s deadline) or failing (every Update and
// Decide fails, which the server answers Internal).
type faultyStore struct {
	store.Store
	mode atomic.Int32
}

func (f *faultyStore) Update(ctx context.Context, k target.Key, fn func(*target.Record) error) (target.Record, error) {
	if err := f.fault(ctx); err != nil {
		return target.Record{}, err
	}
	return f.Store.Update(ctx, k, fn)
}

func (f *faultyStore) Decide(ctx context.Context, k target.Key, fn func(*target.Record) error) (target.Record, error) {
	if err := f.fault(ctx); err != nil {
		return target.Record{}, err
	}
	return f.Store.Decide(ctx, k, fn)
}

// fault applies the store's mode to one write: waits when slow (ctx.Err()
// if ctx ends first), an error when failing.
func (f *faultyStore) fault(ctx context.Context) error {
	switch f.mode.Load() {
	case storeSlow:
		select {
		case <-time.After(5 * time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
	case storeFailing:
		return errors.New("e2e: injected store failure")
	}
	return nil
}

// startFaultyServer runs a real Setpoint server, over TCP and bbolt, whose
// store the test can make slow or failing.
func startFaultyServer(t *testing.T) (*faultyStore, string) {
	t.Helper()
	fs := &faultyStore{}
	srv := servertest.Start(t, servertest.Config{
		Wrap: func(st store.Store) store.Store { fs.Store = st; return fs },
		// The injected failures are logged as internal errors (the
		// harness discards the server's logs).
		Options: server.Options{ShutdownTimeout: time.Second, ExpireAfter: -1},
	})
	return fs, srv.Addr
}

func setUsage(ns, app string, n int, usage string) {
	for i := range n {
		env.metrics.SetPodUsage(ns, fmt.Sprintf("%s-%d", app, i), map[string]string{"app": app}, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(usage)})
	}
}

func waitCondition(t *testing.T, ns, name string, ct autoscalingv2.HorizontalPodAutoscalerConditionType, s corev1.ConditionStatus, reason, msgPart string) {
	t.Helper()
	waitFor(t, 15*time.Second, fmt.Sprintf("%s=%s %s", ct, s, reason), func() (bool, string) {
		c := condition(autoscaler(t, ns, name), ct)
		return c != nil && c.Status == s && (reason == "" || c.Reason == reason) && strings.Contains(c.Message, msgPart), statusText(t, ns, name)
	})
}

// The service is slow (past the agent's deadline) or fails: nothing is
// written, ServiceAvailable=False says which, a Warning Event too; when the
// service is healthy again the agent scales without a restart.
func TestFaultServiceSlowOrFailing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		mode   int32
		reason string
		// text is in the condition's message and the Event's.
		text string
	}{
		{"slow", storeSlow, v1alpha1.ReasonServiceUnavailable, "did not answer (DeadlineExceeded)"},
		{"failing", storeFailing, v1alpha1.ReasonServiceError, "failed (Internal)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := newNamespace(t, "fault-service-"+tc.name)
			fault, addr := startFaultyServer(t)
			createDeployment(t, ns, "web", 2)
			runningPods(t, ns, "web", 2, "100m", "50m")
			createAutoscaler(t, ns, "web", v1alpha1.AutoscalerSpec{ScaleTargetRef: deploymentRef("web"), MaxReplicas: 10, Metrics: cpuUtilization(50)})
			startAgent(t, ns, agentConfig{addr: addr})
			waitCondition(t, ns, "web", v1alpha1.ConditionServiceAvailable, corev1.ConditionTrue, "", "")

			fault.mode.Store(tc.mode)
			setUsage(ns, "web", 2, "75m") // would scale to 3
			waitCondition(t, ns, "web", v1alpha1.ConditionServiceAvailable, corev1.ConditionFalse, tc.reason, tc.text)
			waitEvent(t, ns, "web", "Warning "+tc.reason+" the Setpoint service "+tc.text)
			holdsReplicas(t, ns, "web", 2, 3*syncPeriod)

			fault.mode.Store(storeOK)
			waitReplicas(t, ns, "web", 3, 20*time.Second)
			waitCondition(t, ns, "web", v1alpha1.ConditionServiceAvailable, corev1.ConditionTrue, "", "")
		})
	}
}

// One of two metrics fails (its API answers 503): a scale-up the other
// metric asks for still happens, as the HPA does; a scale-down does not
// (ScalingActive=False), since the failing metric might want more. When the
// metric is back the scale-down happens, without a restart.
func TestFaultOneMetricFails(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "fault-one-metric")
	const metric = "fault_one_metric_queue"
	createDeployment(t, ns, "web", 2)
	runningPods(t, ns, "web", 2, "100m", "50m")
	env.metrics.SetExternalMetric(metricsserver.ExternalMetric{Namespace: ns, Metric: metric, Value: resource.MustParse("10")})
	metrics := append(cpuUtilization(50), autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: metric},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))}}})
	createAutoscaler(t, ns, "web", v1alpha1.AutoscalerSpec{ScaleTargetRef: deploymentRef("web"), MinReplicas: ptr.To[int32](1), MaxReplicas: 10, Metrics: metrics,
		Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)}}})
	startAgent(t, ns, agentConfig{})
	waitCondition(t, ns, "web", autoscalingv2.ScalingActive, corev1.ConditionTrue, "", "")
	holdsReplicas(t, ns, "web", 2, 2*syncPeriod)

	env.metrics.SetUnavailable(metricsserver.ExternalMetrics, metric, true)
	t.Cleanup(func() { env.metrics.SetUnavailable(metricsserver.ExternalMetrics, metric, false) })
	setUsage(ns, "web", 2, "75m") // cpu asks for 3
	waitReplicas(t, ns, "web", 3, 15*time.Second)
	waitEvent(t, ns, "web", "Warning FailedGetExternalMetric")

	setUsage(ns, "web", 3, "10m") // cpu asks for 1; the failing metric blocks it
	waitCondition(t, ns, "web", autoscalingv2.ScalingActive, corev1.ConditionFalse, "FailedGetExternalMetric", "")
	holdsReplicas(t, ns, "web", 3, 3*syncPeriod)

	env.metrics.SetUnavailable(metricsserver.ExternalMetrics, metric, false)
	waitReplicas(t, ns, "web", 1, 20*time.Second)
	waitCondition(t, ns, "web", autoscalingv2.ScalingActive, corev1.ConditionTrue, "", "")
}

// The Scale update is forbidden (the agent's RBAC lacks update on
// deployments/scale): nothing changes, AbleToScale=False/FailedUpdateScale
// and a FailedRescale Event say so; once the right is granted the same
// agent scales.
func TestFaultScaleUpdateForbidden(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "fault-forbidden")
	const user = "fault-forbidden-agent"
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{"setpoint.dev"}, Resources: []string{"autoscalers"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"setpoint.dev"}, Resources: []string{"autoscalers/status"}, Verbs: []string{"update"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments/scale"}, Verbs: []string{"get"}}, // no update
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"events.k8s.io", ""}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		{APIGroups: []string{"metrics.k8s.io"}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
	}
	grant(t, ns, "agent", user, rules)
	cfg, err := env.cluster.UserConfig(user)
	if err != nil {
		t.Fatal(err)
	}
	createDeployment(t, ns, "web", 2)
	runningPods(t, ns, "web", 2, "100m", "75m") // asks for 3
	createAutoscaler(t, ns, "web", v1alpha1.AutoscalerSpec{ScaleTargetRef: deploymentRef("web"), MaxReplicas: 10, Metrics: cpuUtilization(50)})
	startAgent(t, ns, agentConfig{rest: cfg})

	waitCondition(t, ns, "web", autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedUpdateScale", "forbidden")
	waitEvent(t, ns, "web", "Warning FailedRescale New size: 3")
	holdsReplicas(t, ns, "web", 2, 3*syncPeriod)
	if a := autoscaler(t, ns, "web"); a.Status.DesiredReplicas == 3 {
		t.Errorf("status says desired 3 although the rescale failed: %s", statusText(t, ns, "web"))
	}

	grant(t, ns, "agent-scale", user, []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments/scale"}, Verbs: []string{"update"}}})
	waitReplicas(t, ns, "web", 3, 20*time.Second)
	waitCondition(t, ns, "web", autoscalingv2.AbleToScale, corev1.ConditionTrue, "", "")
}

// grant binds a new Role with rules to user in ns.
func grant(t *testing.T, ns, name, user string, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := t.Context()
	if _, err := env.kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := env.kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// rescalingService changes the target's replica count behind the agent's
// back, once, between the decision and the agent's update of the Scale.
type rescalingService struct {
	agent.Service
	ns, name string
	to       int32
	done     atomic.Bool
}

func (s *rescalingService) Recommend(ctx context.Context, req *agent.Request) (*agent.Recommendation, error) {
	rec, err := s.Service.Recommend(ctx, req)
	if err == nil && rec.Rescale && s.done.CompareAndSwap(false, true) {
		sc := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.name}, Spec: autoscalingv1.ScaleSpec{Replicas: s.to}}
		if _, uerr := env.kube.AppsV1().Deployments(s.ns).UpdateScale(ctx, s.name, sc, metav1.UpdateOptions{}); uerr != nil {
			return nil, uerr
		}
	}
	return rec, err
}

// Someone else rescales the target between the agent's read and its
// update: the update conflicts and the agent does not overwrite the other
// writer's count with a decision made for the old one (FailedRescale); the
// next decision starts from the new count.
func TestFaultConcurrentRescale(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "fault-concurrent")
	createDeployment(t, ns, "web", 2)
	runningPods(t, ns, "web", 2, "100m", "75m") // asks for 3 from 2
	createAutoscaler(t, ns, "web", v1alpha1.AutoscalerSpec{ScaleTargetRef: deploymentRef("web"), MaxReplicas: 10, Metrics: cpuUtilization(50)})
	rs := &rescalingService{ns: ns, name: "web", to: 6}
	startAgent(t, ns, agentConfig{wrap: func(s agent.Service) agent.Service { rs.Service = s; return rs }})
	waitEvent(t, ns, "web", "Warning FailedRescale New size: 3")
	if !rs.done.Load() {
		t.Fatal("no concurrent rescale was provoked")
	}
	if evs := strings.Join(eventsOf(t, ns, "web"), " | "); !strings.Contains(evs, "rescaled concurrently: from 2 to 6") {
		t.Errorf("the FailedRescale Event does not say why: %s", evs)
	}
	// The agent carries on from the other writer's 6: the service hears
	// of the external change, and the next rescale is decided at 6.
	client := setpointv1.NewAutoscalerServiceClient(dial(t, env.server.addr))
	waitFor(t, 20*time.Second, "a rescale decided at 6 replicas", func() (bool, string) {
		resp, err := client.GetTarget(t.Context(), &setpointv1.GetTargetRequest{Target: &setpointv1.TargetKey{Cluster: "e2e", Namespace: ns, Name: "web"}})
		if err != nil {
			return false, err.Error()
		}
		tg := resp.GetTarget()
		var kinds []string
		external := false
		for _, e := range tg.GetEvents() {
			kinds = append(kinds, fmt.Sprintf("%s %d→%d", e.GetKind(), e.GetFrom(), e.GetTo()))
			external = external || (e.GetKind() == "External" && e.GetFrom() == 2 && e.GetTo() == 6)
		}
		at := tg.GetLastDecision().GetExplanation().GetCurrentReplicas()
		return external && at == 6 && deploymentReplicas(t, ns, "web") == tg.GetLastDecision().GetDesiredReplicas(),
			fmt.Sprintf("events %v; last decision at %d replicas; %s", kinds, at, statusText(t, ns, "web"))
	})
}

// The metrics API fails for every metric: ScalingActive=False with the
// HPA's reason, a Warning Event, no write; when the API is back the agent
// scales. Not parallel: it takes the shared metrics API down.
func TestFaultAllMetricsFail(t *testing.T) {
	ns := newNamespace(t, "fault-all-metrics")
	createDeployment(t, ns, "web", 2)
	runningPods(t, ns, "web", 2, "100m", "50m")
	createAutoscaler(t, ns, "web", v1alpha1.AutoscalerSpec{ScaleTargetRef: deploymentRef("web"), MaxReplicas: 10, Metrics: cpuUtilization(50)})
	startAgent(t, ns, agentConfig{})
	waitCondition(t, ns, "web", autoscalingv2.ScalingActive, corev1.ConditionTrue, "", "")

	env.metrics.SetUnavailable(metricsserver.ResourceMetrics, "", true)
	t.Cleanup(func() { env.metrics.SetUnavailable(metricsserver.ResourceMetrics, "", false) })
	setUsage(ns, "web", 2, "75m") // would scale to 3, if anyone could see it
	waitCondition(t, ns, "web", autoscalingv2.ScalingActive, corev1.ConditionFalse, "FailedGetResourceMetric", "")
	waitEvent(t, ns, "web", "Warning FailedGetResourceMetric")
	holdsReplicas(t, ns, "web", 2, 3*syncPeriod)

	env.metrics.SetUnavailable(metricsserver.ResourceMetrics, "", false)
	waitReplicas(t, ns, "web", 3, 20*time.Second)
	waitCondition(t, ns, "web", autoscalingv2.ScalingActive, corev1.ConditionTrue, "", "")
}

// The kube-apiserver crashes and comes back (etcd keeps the objects): the
// agent writes nothing wrong meanwhile, and afterwards its informers and
// clients carry on without a restart. Not parallel: every case shares the
// apiserver.
func TestFaultAPIServerRestart(t *testing.T) {
	ns := newNamespace(t, "fault-apiserver")
	createDeployment(t, ns, "web", 2)
	runningPods(t, ns, "web", 2, "100m", "75m")
	createAutoscaler(t, ns, "web", v1alpha1.AutoscalerSpec{ScaleTargetRef: deploymentRef("web"), MaxReplicas: 10, Metrics: cpuUtilization(50)})
	startAgent(t, ns, agentConfig{})
	waitReplicas(t, ns, "web", 3, 15*time.Second)

	began := time.Now()
	if err := env.cluster.RestartAPIServer(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Logf("apiserver restarted in %v", time.Since(began).Round(time.Millisecond))
	holdsReplicas(t, ns, "web", 3, 2*syncPeriod)

	// New load after the restart: only an agent whose watches and
	// clients recovered can act on it.
	setUsage(ns, "web", 2, "100m") // 2 pods at 200% of 50%: 4
	waitReplicas(t, ns, "web", 4, 30*time.Second)
	waitCondition(t, ns, "web", v1alpha1.ConditionServiceAvailable, corev1.ConditionTrue, "", "")
}
