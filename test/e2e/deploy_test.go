package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/setpointhq/setpoint/agent"
	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
)

// deployObjects reads the objects of deploy/ as kustomize would emit them
// (resources of kustomization.yaml, namespace set on namespaced objects).
func deployObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	var k struct {
		Namespace string   `json:"namespace"`
		Resources []string `json:"resources"`
	}
	b, err := os.ReadFile("../../deploy/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, r := range k.Resources {
		b, err := os.ReadFile(filepath.Join("../../deploy", r))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(b), "\n---\n") {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatalf("%s: %v", r, err)
			}
			if len(obj) == 0 {
				continue
			}
			u := &unstructured.Unstructured{Object: obj}
			switch u.GetKind() {
			case "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding":
			default:
				u.SetNamespace(k.Namespace)
			}
			out = append(out, u)
		}
	}
	return out
}

// The manifests of deploy/ are accepted by a real apiserver, and the agent
// does its job with exactly the rights they grant its ServiceAccount.
func TestDeployManifestsAndRBAC(t *testing.T) {
	ctx := t.Context()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.kube.Discovery()))
	for _, u := range deployObjects(t) {
		if u.GetKind() == "CustomResourceDefinition" {
			continue // installed by TestMain from the same file
		}
		m, err := mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
		if err != nil {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
		var res interface {
			Create(context.Context, *unstructured.Unstructured, metav1.CreateOptions, ...string) (*unstructured.Unstructured, error)
		} = env.dyn.Resource(m.Resource)
		if u.GetNamespace() != "" {
			res = env.dyn.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		if _, err := res.Create(ctx, u, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}

	sa, err := env.cluster.ServiceAccountConfig(ctx, "setpoint-system", "setpoint-agent")
	if err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(t, "rbac")
	createDeployment(t, ns, "web", 2)
	runningPods(t, ns, "web", 2, "100m", "75m")
	createDeployment(t, ns, "api", 2)
	runningPods(t, ns, "api", 2, "100m", "75m")
	createAutoscaler(t, ns, "web", v1alpha1.AutoscalerSpec{ScaleTargetRef: deploymentRef("web"), MinReplicas: ptr.To[int32](1), MaxReplicas: 10, Metrics: cpuUtilization(50)})
	startLeaderAgent(t, ns, "setpoint-system", "agent-rbac", agentConfig{rest: sa, serve: agent.ServeBoth})
	waitReplicas(t, ns, "web", 3, 20*time.Second)
	waitEvent(t, ns, "web", "Normal SuccessfulRescale New size: 3")
	nativeWithServiceAccount(t, ns)
	if h := holder(t, "setpoint-system"); h != "agent-rbac" {
		t.Errorf("lease holder = %q", h)
	}
}
