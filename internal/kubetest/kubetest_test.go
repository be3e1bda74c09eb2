package kubetest_test

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	"k8s.io/metrics/pkg/client/custom_metrics"
	"k8s.io/metrics/pkg/client/external_metrics"

	"github.com/setpointhq/setpoint/internal/kubetest"
	"github.com/setpointhq/setpoint/internal/kubetest/metricsserver"
	"github.com/setpointhq/setpoint/internal/testkit"
)

// TestCluster is the harness's smoke test: it starts a real kube-apiserver
// and etcd and exercises what the agent's end-to-end tests rely on.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver and etcd; skipped with -short")
	}
	start := time.Now()
	crd, err := kubetest.AutoscalerCRD()
	if err != nil {
		t.Fatal(err)
	}
	c := kubetest.StartT(t, kubetest.Options{CRDs: [][]byte{crd}})
	t.Logf("cluster ready in %v at %s", time.Since(start).Round(time.Millisecond), c.Host())

	ctx := t.Context()
	client := c.Client()
	const ns = "smoke"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	webLabels := map[string]string{"app": "web"}

	t.Run("scale subresource", func(t *testing.T) {
		deploy := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: appsv1.DeploymentSpec{
				Replicas: new(int32(1)),
				Selector: &metav1.LabelSelector{MatchLabels: webLabels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: webLabels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/web:1"}}},
				},
			},
		}
		if _, err := client.AppsV1().Deployments(ns).Create(ctx, deploy, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create deployment: %v", err)
		}
		cached := memory.NewMemCacheClient(client.Discovery())
		mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)
		scales, err := scale.NewForConfig(c.Config(), mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(cached))
		if err != nil {
			t.Fatalf("scale client: %v", err)
		}
		gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
		s, err := scales.Scales(ns).Get(ctx, gr, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get scale: %v", err)
		}
		if s.Spec.Replicas != 1 || s.Status.Selector != "app=web" {
			t.Errorf("scale = replicas %d selector %q, want 1 and app=web", s.Spec.Replicas, s.Status.Selector)
		}
		s.Spec.Replicas = 3
		if _, err := scales.Scales(ns).Update(ctx, gr, s, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update scale: %v", err)
		}
		got, err := client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get deployment: %v", err)
		}
		if *got.Spec.Replicas != 3 {
			t.Errorf("deployment replicas = %d after scale update, want 3", *got.Spec.Replicas)
		}
	})

	t.Run("CRDs installed at start", func(t *testing.T) {
		autoscalers := schema.GroupVersionResource{Group: "setpoint.dev", Version: "v1alpha1", Resource: "autoscalers"}
		if _, err := c.Dynamic().Resource(autoscalers).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("list autoscalers: %v", err)
		}
	})

	t.Run("pod status", func(t *testing.T) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-0", Labels: webLabels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/web:1"}}},
		}
		created, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create pod: %v", err)
		}
		now := metav1.Now()
		created.Status = corev1.PodStatus{
			Phase:     corev1.PodRunning,
			StartTime: &now,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			},
		}
		if _, err := client.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update pod status: %v", err)
		}
		got, err := client.CoreV1().Pods(ns).Get(ctx, "web-0", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get pod: %v", err)
		}
		if got.Status.Phase != corev1.PodRunning || len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Status != corev1.ConditionTrue {
			t.Errorf("pod status = %+v, want Running and Ready", got.Status)
		}
	})

	t.Run("rbac", func(t *testing.T) {
		alice, err := c.UserConfig("alice")
		if err != nil {
			t.Fatal(err)
		}
		sa, err := c.ServiceAccountConfig(ctx, ns, "agent")
		if err != nil {
			t.Fatal(err)
		}
		for name, cfg := range map[string]*kubernetes.Clientset{"user": mustClient(t, alice), "service account": mustClient(t, sa)} {
			if _, err := cfg.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("%s without a role: list pods error = %v, want Forbidden", name, err)
			}
		}
		// Not the "view" ClusterRole: it is aggregated by the controller
		// manager, which does not run, so its rule list stays empty.
		role := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod-reader"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}},
		}
		if _, err := client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create role: %v", err)
		}
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-pod-reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "agent"}},
		}
		if _, err := client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create role binding: %v", err)
		}
		// The RBAC authorizer reads bindings from an informer, so a new
		// binding takes effect a moment after it is created.
		saClient := mustClient(t, sa)
		err = testkit.Poll(t.Context(), 5*time.Second, func() error {
			_, err := saClient.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err
		})
		if err != nil {
			t.Errorf("service account with pod-reader: list pods: %v", err)
		}
	})

	t.Run("metrics through the aggregator", func(t *testing.T) {
		ms := metricsserver.StartT(t, metricsserver.Options{ClientCA: c.FrontProxyCAPEM()})
		ms.SetPodUsage(ns, "web-0", webLabels, corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("250m"),
			corev1.ResourceMemory: resource.MustParse("64Mi"),
		})
		ms.SetPodUsage(ns, "other-0", map[string]string{"app": "other"}, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")})
		ms.SetCustomMetric(metricsserver.CustomMetric{
			Resource: "pods", Namespace: ns, Name: "web-0", Kind: "Pod", APIVersion: "v1", Labels: webLabels,
			Metric: "http_requests_per_second", Value: resource.MustParse("42"),
		})
		ms.SetCustomMetric(metricsserver.CustomMetric{
			Resource: "deployments.apps", Namespace: ns, Name: "web", Kind: "Deployment", APIVersion: "apps/v1",
			Metric: "queue_depth", Value: resource.MustParse("7"),
		})
		ms.SetCustomMetric(metricsserver.CustomMetric{
			Resource: "namespaces", Name: ns, Kind: "Namespace", APIVersion: "v1",
			Metric: "tenant_load", Value: resource.MustParse("1500m"),
		})
		ms.SetExternalMetric(metricsserver.ExternalMetric{
			Namespace: ns, Metric: "queue_messages_ready", Labels: map[string]string{"queue": "orders"}, Value: resource.MustParse("120"),
		})
		ms.SetExternalMetric(metricsserver.ExternalMetric{
			Namespace: ns, Metric: "queue_messages_ready", Labels: map[string]string{"queue": "billing"}, Value: resource.MustParse("3"),
		})

		registerStart := time.Now()
		if err := ms.Register(ctx, c.Config()); err != nil {
			t.Fatalf("register: %v", err)
		}
		t.Logf("metrics APIs available in %v", time.Since(registerStart).Round(time.Millisecond))

		cfg := c.Config()
		resourceMetrics, err := metricsclient.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		pm, err := resourceMetrics.MetricsV1beta1().PodMetricses(ns).Get(ctx, "web-0", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get pod metrics: %v", err)
		}
		if cpu := pm.Containers[0].Usage.Cpu().MilliValue(); cpu != 250 {
			t.Errorf("web-0 cpu = %dm, want 250m", cpu)
		}
		pms, err := resourceMetrics.MetricsV1beta1().PodMetricses(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			t.Fatalf("list pod metrics: %v", err)
		}
		if len(pms.Items) != 1 || pms.Items[0].Name != "web-0" {
			t.Errorf("pod metrics for app=web = %d items, want web-0 only", len(pms.Items))
		}

		mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery()))
		custom := custom_metrics.NewForConfig(cfg, mapper, custom_metrics.NewAvailableAPIsGetter(client.Discovery()))
		podValues, err := custom.NamespacedMetrics(ns).GetForObjects(schema.GroupKind{Kind: "Pod"},
			labels.SelectorFromSet(webLabels), "http_requests_per_second", labels.Everything())
		if err != nil {
			t.Fatalf("custom pods metric: %v", err)
		}
		if len(podValues.Items) != 1 || podValues.Items[0].Value.Value() != 42 {
			t.Errorf("custom pods metric = %+v, want one value 42", podValues.Items)
		}
		objValue, err := custom.NamespacedMetrics(ns).GetForObject(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "web", "queue_depth", labels.Everything())
		if err != nil {
			t.Fatalf("custom object metric: %v", err)
		}
		if objValue.Value.Value() != 7 {
			t.Errorf("custom object metric = %s, want 7", objValue.Value.String())
		}
		nsValue, err := custom.RootScopedMetrics().GetForObject(schema.GroupKind{Kind: "Namespace"}, ns, "tenant_load", labels.Everything())
		if err != nil {
			t.Fatalf("custom namespace metric: %v", err)
		}
		if nsValue.Value.MilliValue() != 1500 {
			t.Errorf("custom namespace metric = %s, want 1500m", nsValue.Value.String())
		}

		external, err := external_metrics.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ext, err := external.NamespacedMetrics(ns).List("queue_messages_ready", labels.SelectorFromSet(labels.Set{"queue": "orders"}))
		if err != nil {
			t.Fatalf("external metric: %v", err)
		}
		if len(ext.Items) != 1 || ext.Items[0].Value.Value() != 120 {
			t.Errorf("external metric = %+v, want one value 120", ext.Items)
		}

		ms.SetUnavailable(metricsserver.ExternalMetrics, "queue_messages_ready", true)
		if _, err := external.NamespacedMetrics(ns).List("queue_messages_ready", labels.Everything()); !apierrors.IsServiceUnavailable(err) {
			t.Errorf("external metric while unavailable: error = %v, want ServiceUnavailable", err)
		}

		// The kube-apiserver authorizes requests for aggregated APIs itself,
		// before proxying them, so the agent needs RBAC rules for the
		// metrics resources.
		readerCfg, err := c.ServiceAccountConfig(ctx, ns, "metrics-reader")
		if err != nil {
			t.Fatal(err)
		}
		reader, err := metricsclient.NewForConfig(readerCfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := reader.MetricsV1beta1().PodMetricses(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("pod metrics without a role: error = %v, want Forbidden", err)
		}
		role := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"metrics.k8s.io"}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
				{APIGroups: []string{"custom.metrics.k8s.io", "external.metrics.k8s.io"}, Resources: []string{"*"}, Verbs: []string{"get", "list"}},
			},
		}
		if _, err := client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create cluster role: %v", err)
		}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "metrics-reader"}},
		}
		if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create cluster role binding: %v", err)
		}
		err = testkit.Poll(t.Context(), 5*time.Second, func() error {
			_, err := reader.MetricsV1beta1().PodMetricses(ns).List(ctx, metav1.ListOptions{})
			return err
		})
		if err != nil {
			t.Errorf("pod metrics with metrics-reader: %v", err)
		}

		var sawAdmin bool
		for _, r := range ms.Requests() {
			sawAdmin = sawAdmin || r.User == kubetest.AdminUser
		}
		if !sawAdmin {
			t.Errorf("metrics server saw no request from %s through the aggregator", kubetest.AdminUser)
		}
	})
}

func mustClient(t *testing.T, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}
