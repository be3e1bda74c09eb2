package fleete2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/setpointhq/setpoint/agent"
	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	setpointclient "github.com/setpointhq/setpoint/clients/go"
	"github.com/setpointhq/setpoint/hpa"
	"github.com/setpointhq/setpoint/internal/kubetest"
	"github.com/setpointhq/setpoint/internal/kubetest/metricsserver"
	"github.com/setpointhq/setpoint/internal/securetest"
	"github.com/setpointhq/setpoint/internal/testkit"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

const (
	// ns is the namespace of the fleet, its workloads and Autoscalers:
	// the fleet docs/fleets.md's example names.
	ns = "shop"
	// clusterLabel marks the "cluster" of an Autoscaler: each agent
	// serves only the Autoscalers of its own.
	clusterLabel = "setpoint.test/cluster"
	syncPeriod   = time.Second
	// wait bounds each wait for the agents and the fleet.
	wait = 30 * time.Second
)

// principals: an admin, and each cluster's agent with its own identity.
const principals = `principals:
- name: admin
  role: admin
  certificates: [spiffe://setpoint.test/admin]
- name: agent-eu
  role: cluster:eu
  certificates: [spiffe://setpoint.test/cluster/eu]
- name: agent-us
  role: cluster:us
  certificates: [spiffe://setpoint.test/cluster/us]
`

// env is what the test shares.
type env struct {
	cluster *kubetest.Cluster
	kube    kubernetes.Interface
	metrics *metricsserver.Server
	server  *securetest.Server
	admin   setpointv1.FleetServiceClient
}

// Two members of one fleet in one API server, served by two agents as the
// clusters eu and us: both apply their shares of the fleet's total; a
// member whose workload is missing, or whose Scale update is refused,
// reports that it cannot scale and is left out; it comes back once it can.
func TestTwoClustersOneFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver and etcd")
	}
	e := start(t)
	ctx := t.Context()
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The workloads: 3 replicas in eu, 1 in us, every pod at the fleet's
	// 50% target, so the fleet's total is what the members run.
	e.deployment(t, "web-eu", 3)
	e.deployment(t, "web-us", 1)
	e.pods(t, "web-eu", 3)
	e.pods(t, "web-us", 1)

	spec := &setpointv1.FleetSpec{
		Autoscaler: hpa.Spec(autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](1),
			MaxReplicas:    10,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}},
		}),
		Members:    []*setpointv1.FleetMember{{Cluster: "eu", Weight: 1}, {Cluster: "us", Weight: 1}},
		SyncPeriod: durationpb.New(syncPeriod),
	}
	fk := &setpointv1.FleetKey{Namespace: ns, Name: "web"}
	if _, err := e.admin.PutFleet(ctx, &setpointv1.PutFleetRequest{Fleet: fk, Spec: spec}); err != nil {
		t.Fatalf("PutFleet as admin: %v", err)
	}

	// The members' Autoscalers are the docs' example: scaleTargetRef and
	// fleet only, which the CRD accepts; an Autoscaler with neither fleet
	// nor maxReplicas it refuses.
	e.member(t, "web-eu", "eu")
	e.member(t, "web-us", "us")
	bad, err := v1alpha1.ToUnstructured(&v1alpha1.Autoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"},
		Spec: v1alpha1.AutoscalerSpec{ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web-eu"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cluster.Dynamic().Resource(v1alpha1.AutoscalerResource).Namespace(ns).Create(ctx, bad, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "maxReplicas is required unless fleet is set") {
		t.Errorf("an Autoscaler without fleet and maxReplicas: %v, want refused", err)
	}

	// The agent of us runs with a role that may read Scales, and update
	// them while the second role is bound.
	usConfig := e.grantAgent(t, "agent-us")
	e.grantScaleUpdate(t, "agent-us")
	started := time.Now()
	e.startAgent(t, "eu", e.cluster.Config())
	e.startAgent(t, "us", usConfig)

	// 3 + 1 replicas at target: a total of 4, split 2/2; both writes land.
	e.waitShares(t, "both members apply their shares", 4, map[string]int32{"eu": 2, "us": 2})
	t.Logf("shares applied %v after the agents started (sync period %v)", time.Since(started).Round(10*time.Millisecond), syncPeriod)
	e.waitEvent(t, "web-us", "Normal FleetShareChanged share 2 of fleet web's 4 replicas")
	e.waitEvent(t, "web-eu", "Normal SuccessfulRescale New size: 2; reason: share of fleet web")

	// us's workload is deleted: us reports that it cannot scale and is
	// left out, and its replicas are left alone.
	if err := e.kube.AppsV1().Deployments(ns).Delete(ctx, "web-us", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	// Its share moves to eu: the fleet's total holds at 4 (the scale-down
	// stabilization window), and eu now runs all of it.
	e.waitExcluded(t, "us", "cannot read the scale of Deployment/web-us", "FailedGetScale")
	e.waitShares(t, "us's share moved to eu", 4, map[string]int32{"eu": 4, "us": 0})
	t.Logf("us's share moved to eu %v after its workload was deleted", time.Since(deleted).Round(10*time.Millisecond))
	// It comes back with 1 replica: pooled again, 4 + 1 = 5 at target,
	// split 3/2 (the default scale-down policy lets eu fall at once).
	e.deployment(t, "web-us", 1)
	e.waitShares(t, "us pooled again", 5, map[string]int32{"eu": 3, "us": 2})

	// us may no longer update its Scale, and the fleet's new weights (1:2,
	// 5 split 2/3) ask it to: it reports that it cannot scale, and the
	// fleet leaves it out.
	if err := e.kube.RbacV1().RoleBindings(ns).Delete(ctx, "agent-us-scale", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	spec.Members[1].Weight = 2
	if _, err := e.admin.PutFleet(ctx, &setpointv1.PutFleetRequest{Fleet: fk, Spec: spec}); err != nil {
		t.Fatalf("PutFleet with new weights: %v", err)
	}
	e.waitExcluded(t, "us", "cannot update the scale of Deployment/web-us", "FailedUpdateScale")
	e.waitEvent(t, "web-us", "Warning FleetCannotScale")
	if got := e.replicas(t, "web-us"); got != 2 {
		t.Errorf("web-us runs %d replicas after its update was refused, want 2", got)
	}
	// Allowed again: it can scale, is pooled, and takes its share.
	e.grantScaleUpdate(t, "agent-us")
	testkit.Eventually(t, wait, "us pooled again once it may update its Scale", func() error {
		f := e.fleet(t)
		if m := memberOf(f, "us"); !m.GetPooled() {
			return fmt.Errorf("us: %v", m)
		}
		if c := condition(e.status(t, "web-us"), autoscalingv2.AbleToScale); c == nil || c.Status != corev1.ConditionTrue {
			return fmt.Errorf("web-us AbleToScale %v", c)
		}
		return sharesApplied(e, f)
	})
	for _, name := range []string{"web-eu", "web-us"} {
		st := e.status(t, name)
		var conds []string
		for _, c := range st.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message))
		}
		t.Logf("%s: desired %d of %d, current %d, targets %s\n  explanation: %s\n  %s", name, st.DesiredReplicas, ptr.Deref(st.FleetReplicas, 0),
			st.CurrentReplicas, st.Targets, st.Explanation.Summary, strings.Join(conds, "\n  "))
	}
}

// start runs the API server with the CRD, the metrics APIs and the
// Setpoint server with authentication; it returns the admin's client.
func start(t *testing.T) *env {
	t.Helper()
	crd, err := kubetest.AutoscalerCRD()
	if err != nil {
		t.Fatal(err)
	}
	c := kubetest.StartT(t, kubetest.Options{CRDs: [][]byte{crd}})
	ms, err := metricsserver.StartRegistered(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ms.Close() })
	e := &env{cluster: c, kube: c.Client(), metrics: ms, server: securetest.Start(t, principals)}
	e.admin = setpointv1.NewFleetServiceClient(e.dial(t, "admin", "spiffe://setpoint.test/admin"))
	return e
}

// dial connects to the Setpoint server with a client certificate for uri.
func (e *env) dial(t *testing.T, name, uri string) *grpc.ClientConn {
	t.Helper()
	files := e.server.Client(t, name, uri)
	tc, err := setpointclient.TLSFiles{CA: files.CA, Cert: files.Cert, Key: files.Key, ServerName: "localhost"}.Config()
	if err != nil {
		t.Fatal(err)
	}
	c, err := setpointclient.Dial(e.server.Addr, setpointclient.Options{TLS: tc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c.Conn()
}

// startAgent runs an agent as cluster with the Kubernetes identity cfg,
// serving the Autoscalers labelled with its cluster, until the test ends.
func (e *env) startAgent(t *testing.T, cluster string, cfg *rest.Config) {
	t.Helper()
	clients, err := agent.NewKubeClients(cfg, agent.KubeClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conn := e.dial(t, "agent-"+cluster, "spiffe://setpoint.test/cluster/"+cluster)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background().WithValues("cluster", cluster)))
	recorders := agent.StartEventRecorders(ctx, clients.Kube)
	opts := clients.Options()
	opts.Service = agent.NewGRPCService(conn)
	opts.Fleets = setpointv1.NewFleetServiceClient(conn)
	opts.Events, opts.HPAEvents = recorders.Autoscalers, recorders.HPAs
	opts.Cluster = cluster
	opts.SyncPeriod = syncPeriod
	opts.RecommendTimeout = 2 * time.Second
	opts.RateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 2*time.Second)
	kube := informers.NewSharedInformerFactoryWithOptions(opts.Kube, 0, informers.WithNamespace(ns))
	dynamic := dynamicinformer.NewFilteredDynamicSharedInformerFactory(opts.Dynamic, 0, ns, func(o *metav1.ListOptions) {
		o.LabelSelector = clusterLabel + "=" + cluster
	})
	opts.Informers = agent.InformersFrom(agent.ServeAutoscalers, kube, dynamic)
	c, err := agent.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	kube.Start(ctx.Done())
	dynamic.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.Run(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("agent %s: %v", cluster, err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		kube.Shutdown()
		dynamic.Shutdown()
		recorders.Stop()
	})
}

// grantAgent gives user what an agent needs in ns, but updating Scales,
// and returns its client configuration.
func (e *env) grantAgent(t *testing.T, user string) *rest.Config {
	t.Helper()
	e.bind(t, user, user, []rbacv1.PolicyRule{
		{APIGroups: []string{"setpoint.dev"}, Resources: []string{"autoscalers"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"setpoint.dev"}, Resources: []string{"autoscalers/status"}, Verbs: []string{"update"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments/scale"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"events.k8s.io", ""}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		{APIGroups: []string{"metrics.k8s.io"}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
	})
	cfg, err := e.cluster.UserConfig(user)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// grantScaleUpdate lets user update Scales in ns (Role and RoleBinding
// <user>-scale).
func (e *env) grantScaleUpdate(t *testing.T, user string) {
	t.Helper()
	e.bind(t, user+"-scale", user, []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments/scale"}, Verbs: []string{"update"}}})
}

// bind binds a Role name with rules to user in ns; an existing Role is
// kept.
func (e *env) bind(t *testing.T, name, user string, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := t.Context()
	if _, err := e.kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := e.kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (e *env) deployment(t *testing.T, name string, replicas int32) {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}},
			},
		},
	}
	if _, err := e.kube.AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// pods creates n ready pods of app, started 10 minutes ago, each using
// 50m of its 100m cpu request (the fleet's target), as a kubelet and the
// metrics server would show them.
func (e *env) pods(t *testing.T, app string, n int) {
	t.Helper()
	ctx := t.Context()
	labels := map[string]string{"app": app}
	for i := range n {
		name := fmt.Sprintf("%s-%d", app, i)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "app", Image: "example.invalid/app:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
			}}},
		}
		created, err := e.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		created.Status = corev1.PodStatus{
			Phase:      corev1.PodRunning,
			StartTime:  &metav1.Time{Time: now.Add(-10 * time.Minute)},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-9 * time.Minute))}},
		}
		if _, err := e.kube.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.metrics.SetPodUsage(ns, name, labels, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")})
	}
}

// member creates the Autoscaler docs/fleets.md shows, as name (scaling
// the Deployment name) in cluster.
func (e *env) member(t *testing.T, name, cluster string) {
	t.Helper()
	a := docsExample(t)
	if a.Namespace != ns || a.Spec.Fleet == nil || a.Spec.Fleet.Name != "web" || a.Spec.MaxReplicas != 0 {
		t.Fatalf("docs/fleets.md's example is %s/%s with spec %+v; the test expects a member of %s/web without maxReplicas", a.Namespace, a.Name, a.Spec, ns)
	}
	a.Name, a.Labels = name, map[string]string{clusterLabel: cluster}
	a.Spec.ScaleTargetRef.Name = name
	u, err := v1alpha1.ToUnstructured(a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cluster.Dynamic().Resource(v1alpha1.AutoscalerResource).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the docs' member Autoscaler: %v", err)
	}
}

// docsExample is the member Autoscaler in docs/fleets.md's Agent section.
func docsExample(t *testing.T) *v1alpha1.Autoscaler {
	t.Helper()
	doc, err := os.ReadFile("../../docs/fleets.md")
	if err != nil {
		t.Fatal(err)
	}
	_, agentSection, ok := bytes.Cut(doc, []byte("\n## Agent\n"))
	_, block, ok2 := bytes.Cut(agentSection, []byte("```yaml\n"))
	block, _, ok3 := bytes.Cut(block, []byte("```"))
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/fleets.md has no yaml block in its Agent section")
	}
	var obj map[string]any
	if err := yaml.UnmarshalStrict(block, &obj); err != nil {
		t.Fatalf("docs/fleets.md's example: %v", err)
	}
	a, err := v1alpha1.FromUnstructured(&unstructured.Unstructured{Object: obj})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (e *env) replicas(t *testing.T, name string) int32 {
	t.Helper()
	d, err := e.kube.AppsV1().Deployments(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ptr.Deref(d.Spec.Replicas, 0)
}

func (e *env) status(t *testing.T, name string) v1alpha1.AutoscalerStatus {
	t.Helper()
	u, err := e.cluster.Dynamic().Resource(v1alpha1.AutoscalerResource).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := v1alpha1.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	return a.Status
}

func (e *env) fleet(t *testing.T) *setpointv1.Fleet {
	t.Helper()
	resp, err := e.admin.GetFleet(t.Context(), &setpointv1.GetFleetRequest{Fleet: &setpointv1.FleetKey{Namespace: ns, Name: "web"}})
	if err != nil {
		t.Fatalf("GetFleet as admin: %v", err)
	}
	return resp.GetFleet()
}

// waitShares waits until the fleet's last split is total with these
// shares, each member's workload runs its share, and each member's status
// shows it.
func (e *env) waitShares(t *testing.T, what string, total int32, shares map[string]int32) {
	t.Helper()
	testkit.Eventually(t, wait, what, func() error {
		f := e.fleet(t)
		split := f.GetSplit()
		if split.GetTotal() != total {
			return fmt.Errorf("split %v, want a total of %d; members %v; last decision %v", split, total, f.GetMembers(), f.GetLastDecision().GetExplanation())
		}
		for _, s := range split.GetShares() {
			if want, ok := shares[s.GetMember()]; ok && s.GetReplicas() != want {
				return fmt.Errorf("share of %s is %d, want %d: %s", s.GetMember(), s.GetReplicas(), want, split.GetMessage())
			}
		}
		return sharesApplied(e, f)
	})
}

// sharesApplied checks that each pooled member's workload runs its share
// of the fleet's last split and that its Autoscaler's status says so.
func sharesApplied(e *env, f *setpointv1.Fleet) error {
	for _, s := range f.GetSplit().GetShares() {
		if s.GetReason() == "Excluded" {
			continue // its workload is left as it is
		}
		name := "web-" + s.GetMember()
		d, err := e.kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := ptr.Deref(d.Spec.Replicas, 0); got != s.GetReplicas() {
			return fmt.Errorf("%s runs %d replicas, its share is %d", name, got, s.GetReplicas())
		}
		u, err := e.cluster.Dynamic().Resource(v1alpha1.AutoscalerResource).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		a, err := v1alpha1.FromUnstructured(u)
		if err != nil {
			return err
		}
		st := a.Status
		c := condition(st, v1alpha1.ConditionFleetShare)
		if st.DesiredReplicas != s.GetReplicas() || ptr.Deref(st.FleetReplicas, -1) != f.GetSplit().GetTotal() || c == nil || c.Status != corev1.ConditionTrue {
			return fmt.Errorf("%s status: desired %d fleet %v FleetShare %v; want %d of %d", name, st.DesiredReplicas, st.FleetReplicas, c, s.GetReplicas(), f.GetSplit().GetTotal())
		}
	}
	return nil
}

// waitExcluded waits until the fleet left member out because it cannot
// scale, saying why (cannotScale in its report), and the member's status
// says AbleToScale=False (reason) and FleetShare=False (Excluded).
func (e *env) waitExcluded(t *testing.T, member, cannotScale, reason string) {
	t.Helper()
	testkit.Eventually(t, wait, member+" left out: "+cannotScale, func() error {
		m := memberOf(e.fleet(t), member)
		if m.GetPooled() || m.GetExclusion() != "CannotScale" || !strings.Contains(m.GetCannotScale(), cannotScale) {
			return fmt.Errorf("member %v", m)
		}
		st := e.status(t, "web-"+member)
		able, share := condition(st, autoscalingv2.AbleToScale), condition(st, v1alpha1.ConditionFleetShare)
		if able == nil || able.Status != corev1.ConditionFalse || able.Reason != reason || share == nil || share.Reason != v1alpha1.ReasonExcluded {
			return fmt.Errorf("web-%s AbleToScale %v FleetShare %v", member, able, share)
		}
		return nil
	})
}

func (e *env) waitEvent(t *testing.T, name, prefix string) {
	t.Helper()
	testkit.Eventually(t, wait, "event "+prefix+" about "+name, func() error {
		list, err := e.kube.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return err
		}
		var seen []string
		for _, ev := range list.Items {
			text := ev.Type + " " + ev.Reason + " " + ev.Message
			if strings.HasPrefix(text, prefix) {
				return nil
			}
			seen = append(seen, text)
		}
		return errors.New(strings.Join(seen, "\n"))
	})
}

func memberOf(f *setpointv1.Fleet, member string) *setpointv1.FleetMemberStatus {
	for _, m := range f.GetMembers() {
		if m.GetMember() == member {
			return m
		}
	}
	return nil
}

func condition(st v1alpha1.AutoscalerStatus, ct autoscalingv2.HorizontalPodAutoscalerConditionType) *autoscalingv2.HorizontalPodAutoscalerCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == ct {
			return &st.Conditions[i]
		}
	}
	return nil
}
