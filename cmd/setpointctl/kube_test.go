package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	"github.com/setpointhq/setpoint/internal/kubetest"
	"github.com/setpointhq/setpoint/internal/testkit"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"
)

// TestKube runs autoscale and import-hpa against a real kube-apiserver
// with the Autoscaler CRD from deploy/.
func TestKube(t *testing.T) {
	c := kubetest.StartT(t, kubetest.Options{})
	ctx := t.Context()
	dyn, err := dynamic.NewForConfig(c.Config())
	if err != nil {
		t.Fatal(err)
	}
	installCRD(t, c, dyn)
	kubeconfig := writeKubeconfig(t, c, "shop")
	if _, err := c.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	web := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "web:1", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
				}}}},
			},
		},
	}
	if _, err := c.Client().AppsV1().Deployments("shop").Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kctl := func(args ...string) (string, error) {
		var out bytes.Buffer
		cl := &cli{stdin: strings.NewReader(""), stdout: &out, stderr: io.Discard, now: time.Now}
		err := cl.run(ctx, append([]string{args[0], "--kubeconfig", kubeconfig}, args[1:]...))
		return out.String(), err
	}
	autoscalers := dyn.Resource(v1alpha1.AutoscalerResource).Namespace("shop")
	get := func(name string) *v1alpha1.Autoscaler {
		t.Helper()
		u, err := autoscalers.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get autoscaler %s: %v", name, err)
		}
		a, err := v1alpha1.FromUnstructured(u)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}

	t.Run("autoscale", func(t *testing.T) {
		out, err := kctl("autoscale", "deployment/web", "--min", "2", "--max", "10", "--cpu-percent", "60")
		if err != nil || out != "autoscaler.setpoint.dev/web autoscaled\n" {
			t.Fatalf("autoscale = %q, %v", out, err)
		}
		want := v1alpha1.AutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    new(int32(2)),
			MaxReplicas:    10,
			Metrics: []autoscalingv2.MetricSpec{{Type: "Resource", Resource: &autoscalingv2.ResourceMetricSource{
				Name: "cpu", Target: autoscalingv2.MetricTarget{Type: "Utilization", AverageUtilization: new(int32(60))},
			}}},
		}
		if diff := cmp.Diff(want, get("web").Spec); diff != "" {
			t.Errorf("created spec (-want +got):\n%s", diff)
		}
		if _, err := kctl("autoscale", "deployment/web", "--max", "10"); !apierrors.IsAlreadyExists(unwrapAll(err)) {
			t.Errorf("second autoscale: %v, want AlreadyExists", err)
		}
		if _, err := kctl("autoscale", "deploy/missing", "--max", "3"); !apierrors.IsNotFound(unwrapAll(err)) {
			t.Errorf("autoscale of a missing deployment: %v, want NotFound", err)
		}
		if _, err := kctl("autoscale", "frobs/web", "--max", "3"); err == nil {
			t.Error("autoscale of an unknown kind succeeded")
		}
		if _, err := kctl("autoscale", "deployment/web", "--max", "3", "--min", "5"); err == nil {
			t.Error("autoscale with --min above --max succeeded")
		}
		out, err = kctl("autoscale", "deployments.apps/web", "--max", "4", "--name", "web-dry", "--dry-run")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "name: web-dry") || !strings.Contains(out, "maxReplicas: 4") || strings.Contains(out, "status") {
			t.Errorf("--dry-run printed\n%s", out)
		}
		if _, err := autoscalers.Get(ctx, "web-dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("--dry-run created the autoscaler: %v", err)
		}
	})

	t.Run("import-hpa", func(t *testing.T) {
		hpa := &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "shop", Labels: map[string]string{"team": "api"}},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
				MinReplicas:    new(int32(3)),
				MaxReplicas:    12,
				Metrics: []autoscalingv2.MetricSpec{{Type: "Pods", Pods: &autoscalingv2.PodsMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: "requests_per_second"},
					Target: autoscalingv2.MetricTarget{Type: "AverageValue", AverageValue: new(resource.MustParse("100"))},
				}}},
				Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: new(int32(60))}},
			},
		}
		created, err := c.Client().AutoscalingV2().HorizontalPodAutoscalers("shop").Create(ctx, hpa, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := kctl("import-hpa", "api")
		if err != nil {
			t.Fatal(err)
		}
		printed := decodeAutoscalers(t, out)
		if len(printed) != 1 || printed[0].Name != "api" || printed[0].Annotations[ImportedFromAnnotation] != "HorizontalPodAutoscaler/api" {
			t.Fatalf("import-hpa api printed\n%s", out)
		}
		// The API server defaults the behavior; the Autoscaler keeps the
		// HPA's spec as stored.
		if diff := cmp.Diff(created.Spec, hpaSpec(printed[0].Spec)); diff != "" {
			t.Errorf("printed spec differs from the HPA's (-hpa +autoscaler):\n%s", diff)
		}
		if _, err := autoscalers.Get(ctx, "api", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("printing applied the autoscaler: %v", err)
		}
		for range 2 { // applying twice is allowed: server-side apply
			if out, err = kctl("import-hpa", "--apply"); err != nil {
				t.Fatal(err)
			}
		}
		if !strings.Contains(out, "autoscaler.setpoint.dev/api imported (namespace shop)") {
			t.Errorf("import-hpa --apply printed %q", out)
		}
		if diff := cmp.Diff(created.Spec, hpaSpec(get("api").Spec)); diff != "" {
			t.Errorf("applied spec differs from the HPA's (-hpa +autoscaler):\n%s", diff)
		}
		if got := get("api").Labels["team"]; got != "api" {
			t.Errorf("labels not carried over: team=%q", got)
		}
		if _, err := kctl("import-hpa", "missing"); !apierrors.IsNotFound(unwrapAll(err)) {
			t.Errorf("import-hpa of a missing HPA: %v, want NotFound", err)
		}
	})

	t.Run("import-hpa from a file", func(t *testing.T) {
		out, err := kctl("import-hpa", "-f", "testdata/hpas.yaml")
		if err != nil {
			t.Fatal(err)
		}
		got := decodeAutoscalers(t, out)
		if len(got) != 2 {
			t.Fatalf("import-hpa -f printed %d autoscalers:\n%s", len(got), out)
		}
		want := v1alpha1.AutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "legacy"},
			MinReplicas:    new(int32(2)),
			MaxReplicas:    6,
			Metrics: []autoscalingv2.MetricSpec{{Type: "Resource", Resource: &autoscalingv2.ResourceMetricSource{
				Name: "cpu", Target: autoscalingv2.MetricTarget{Type: "Utilization", AverageUtilization: new(int32(70))},
			}}},
		}
		if diff := cmp.Diff(want, got[0].Spec); diff != "" {
			t.Errorf("autoscaling/v1 import (-want +got):\n%s", diff)
		}
		if q := got[1]; q.Name != "queue" || q.Labels["team"] != "orders" || q.Spec.Behavior.ScaleDown.Policies[0].Value != 1 ||
			q.Spec.Metrics[0].External.Metric.Selector.MatchLabels["queue"] != "orders" {
			t.Errorf("autoscaling/v2 list import: %+v", q)
		}
		// The printed objects are valid Autoscalers: the API server takes them.
		for _, a := range got {
			u, err := object(&a)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := autoscalers.Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
				t.Errorf("the API server rejects the imported %s: %v", a.Name, err)
			}
		}
	})
}

// hpaSpec is the HPA spec an Autoscaler spec carries.
func hpaSpec(s v1alpha1.AutoscalerSpec) autoscalingv2.HorizontalPodAutoscalerSpec {
	return autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: s.ScaleTargetRef, MinReplicas: s.MinReplicas, MaxReplicas: s.MaxReplicas, Metrics: s.Metrics, Behavior: s.Behavior}
}

func decodeAutoscalers(t *testing.T, out string) []v1alpha1.Autoscaler {
	t.Helper()
	var as []v1alpha1.Autoscaler
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		var a v1alpha1.Autoscaler
		if err := dec.Decode(&a); err == io.EOF {
			return as
		} else if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if a.Kind != v1alpha1.Kind || a.APIVersion != v1alpha1.Group+"/"+v1alpha1.Version {
			t.Fatalf("printed a %s %s", a.APIVersion, a.Kind)
		}
		as = append(as, a)
	}
}

// unwrapAll returns the innermost error, which the API status errors are.
func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}

// installCRD creates the Autoscaler CRD from deploy/ and waits until it is
// served.
func installCRD(t *testing.T, c *kubetest.Cluster, dyn dynamic.Interface) {
	t.Helper()
	b, err := os.ReadFile("../../deploy/setpoint.dev_autoscalers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if _, err := crds.Create(t.Context(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the Autoscaler CRD to be served", func() error {
		_, err := c.Client().Discovery().ServerResourcesForGroupVersion(v1alpha1.Group + "/" + v1alpha1.Version)
		return err
	})
}

// writeKubeconfig writes a kubeconfig for the cluster's admin whose
// context's namespace is namespace.
func writeKubeconfig(t *testing.T, c *kubetest.Cluster, namespace string) string {
	t.Helper()
	cfg := c.Config()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin", Namespace: namespace}
	kc.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}
