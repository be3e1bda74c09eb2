package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/setpointhq/setpoint/internal/testkit"
)

// crdResource is the resource of CustomResourceDefinitions.
var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRD creates the CustomResourceDefinition in manifest (one YAML
// document) and waits until it is established and its group version is
// served in discovery. A CRD that already exists is left as it is.
func (c *Cluster) InstallCRD(ctx context.Context, manifest []byte) error {
	var obj map[string]any
	if err := yaml.Unmarshal(manifest, &obj); err != nil {
		return fmt.Errorf("kubetest: CRD manifest: %w", err)
	}
	u := &unstructured.Unstructured{Object: obj}
	res := c.dynamic.Resource(crdResource)
	if _, err := res.Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubetest: create CRD %s: %w", u.GetName(), err)
	}
	group, _, _ := unstructured.NestedString(obj, "spec", "group")
	versions, _, _ := unstructured.NestedSlice(obj, "spec", "versions")
	err := testkit.Poll(ctx, 30*time.Second, func() error {
		got, err := res.Get(ctx, u.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		established := false
		for _, cond := range conds {
			m, _ := cond.(map[string]any)
			established = established || m["type"] == "Established" && m["status"] == "True"
		}
		if !established {
			return fmt.Errorf("conditions %v", conds)
		}
		for _, v := range versions {
			m, _ := v.(map[string]any)
			name, _ := m["name"].(string)
			if _, err := c.client.Discovery().ServerResourcesForGroupVersion(group + "/" + name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("kubetest: CRD %s not established: %w", u.GetName(), err)
	}
	return nil
}

// autoscalerCRD is the Autoscaler CRD's manifest, relative to the
// repository root.
const autoscalerCRD = "deploy/setpoint.dev_autoscalers.yaml"

// AutoscalerCRD returns the manifest of Setpoint's Autoscaler
// CustomResourceDefinition as deployed (deploy/setpoint.dev_autoscalers.yaml),
// for Options.CRDs.
func AutoscalerCRD() ([]byte, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(root, autoscalerCRD))
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	return b, nil
}

// WriteKubeconfig writes a kubeconfig file for the admin identity at path,
// for programs the test runs as processes (-kubeconfig).
func (c *Cluster) WriteKubeconfig(path string) error {
	cfg := c.Config()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "admin"}
	kc.CurrentContext = "kubetest"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("kubetest: kubeconfig: %w", err)
	}
	return nil
}
