package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/setpointhq/setpoint/agent"
	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	setpointclient "github.com/setpointhq/setpoint/clients/go"
	"github.com/setpointhq/setpoint/internal/certs"
	"github.com/setpointhq/setpoint/internal/kubetest"
	"github.com/setpointhq/setpoint/internal/servertest"
	"github.com/setpointhq/setpoint/server"
)

// TestInstallSequence follows README's "Run it in a cluster" from start to
// finish: the files `setpointctl certs --dir deploy-local/pki` writes (in
// a copy of deploy/ and deploy-local/), `kubectl apply --server-side -k deploy-local`
// (kustomize's own library, then server-side apply with strict field
// validation) to a fresh kube-apiserver; then a real Setpoint server
// started from the Secret and ConfigMap the apply stored, at the paths its
// Deployment mounts them, and a real agent with the agent's Secret, which
// together scale a Deployment.
func TestInstallSequence(t *testing.T) {
	ctx := t.Context()
	work := t.TempDir()
	copyTree(t, "../../deploy", filepath.Join(work, "deploy"))
	copyTree(t, "../../deploy-local", filepath.Join(work, "deploy-local"))
	files, err := certs.Issue(certs.Defaults(), time.Now()) // setpointctl certs with its defaults
	if err != nil {
		t.Fatal(err)
	}
	if err := certs.Write(filepath.Join(work, "deploy-local", "pki"), files, false); err != nil {
		t.Fatal(err)
	}
	objs := kustomizeBuild(t, filepath.Join(work, "deploy-local"))

	cluster := kubetest.StartT(t, kubetest.Options{})
	kube := cluster.Client()
	dyn, err := dynamic.NewForConfig(cluster.Config())
	if err != nil {
		t.Fatal(err)
	}
	applyAll(t, kube, dyn, objs)

	serverDeploy := deployment(t, kube, "setpoint-server")
	agentDeploy := deployment(t, kube, "setpoint-agent")
	for _, d := range []*appsv1.Deployment{serverDeploy, agentDeploy} {
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "setpoint:dev" {
			t.Errorf("deployment %s runs image %q, want the locally built setpoint:dev", d.Name, img)
		}
	}
	svc, err := kube.CoreV1().Services("setpoint-system").Get(ctx, "setpoint-server", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	serverArgs := flagValues(serverDeploy.Spec.Template.Spec.Containers[0].Args)
	metricsPort := containerPort(t, serverDeploy, "metrics")
	if host, port, _ := net.SplitHostPort(serverArgs["metrics-listen"]); host != "" || port != metricsPort {
		t.Errorf("server -metrics-listen=%s: want every address on the metrics port %s, so the Service reaches it", serverArgs["metrics-listen"], metricsPort)
	}
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.TargetPort.String() == "metrics" }) {
		t.Errorf("Service setpoint-server exposes %v, want the metrics port", svc.Spec.Ports)
	}

	// The server, from the stored objects, at the paths it is given.
	dir := t.TempDir()
	mounted := func(d *appsv1.Deployment, path string) string {
		t.Helper()
		f := filepath.Join(dir, d.Name, filepath.Base(filepath.Dir(path)), filepath.Base(path))
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, mountedFile(t, kube, d, path), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tc, err := server.NewTLSConfig(server.TLSFiles{
		Cert:     mounted(serverDeploy, serverArgs["tls-cert"]),
		Key:      mounted(serverDeploy, serverArgs["tls-key"]),
		ClientCA: mounted(serverDeploy, serverArgs["tls-client-ca"]),
	}, server.ReloadOptions{Logger: log})
	if err != nil {
		t.Fatalf("the server's TLS files as deployed: %v", err)
	}
	auth, err := server.NewAuthenticator(mounted(serverDeploy, serverArgs["auth-config"]), server.ReloadOptions{Logger: log})
	if err != nil {
		t.Fatalf("the server's principals file as deployed: %v", err)
	}
	addr := servertest.Start(t, servertest.Config{Options: server.Options{TLS: tc, Auth: auth, Logger: log}}).Addr

	// The agent, with its Secret, dialing the name its Deployment gives
	// (the Service's), as cluster -cluster-name.
	agentArgs := flagValues(agentDeploy.Spec.Template.Spec.Containers[0].Args)
	serverName, _, err := net.SplitHostPort(agentArgs["service-address"])
	if err != nil {
		t.Fatal(err)
	}
	atc, err := setpointclient.TLSFiles{
		CA:         mounted(agentDeploy, agentArgs["tls-ca-file"]),
		Cert:       mounted(agentDeploy, agentArgs["tls-cert-file"]),
		Key:        mounted(agentDeploy, agentArgs["tls-key-file"]),
		ServerName: serverName,
	}.Config()
	if err != nil {
		t.Fatalf("the agent's TLS files as deployed: %v", err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(atc)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ns := newNamespace(t, "install")
	opts, cleanup := agentOptions(t, ns, agentConfig{addr: addr, wrap: func(agent.Service) agent.Service { return agent.NewGRPCService(conn) }})
	opts.Cluster = agentArgs["cluster-name"]
	opts.Serve = agent.Serve(agentArgs["serve"])
	actx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cleanup()
		if err := runAgent(actx, ns, opts); err != nil && actx.Err() == nil {
			t.Errorf("agent: %v", err)
		}
	}()
	defer func() { cancel(); <-done }()
	createDeployment(t, ns, "web", 2)
	runningPods(t, ns, "web", 2, "100m", "75m")
	createAutoscaler(t, ns, "web", v1alpha1.AutoscalerSpec{ScaleTargetRef: deploymentRef("web"), MinReplicas: ptr.To[int32](1), MaxReplicas: 10, Metrics: cpuUtilization(50)})
	waitReplicas(t, ns, "web", 3, 20*time.Second)
}

// copyTree copies the directory from into to.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// kustomizeBuild is `kubectl kustomize dir`.
func kustomizeBuild(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range rm.Resources() {
		m, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

// applyAll is `kubectl apply --server-side` of objs with strict field
// validation: the Namespace and CRDs first, then the rest once the CRDs
// are established.
func applyAll(t *testing.T, kube kubernetes.Interface, dyn dynamic.Interface, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := t.Context()
	first := func(u *unstructured.Unstructured) bool {
		return u.GetKind() == "Namespace" || u.GetKind() == "CustomResourceDefinition"
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	apply := func(u *unstructured.Unstructured) {
		t.Helper()
		m, err := mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
		if err != nil {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
		b, err := json.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		var res dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if u.GetNamespace() != "" {
			res = dyn.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		if _, err := res.Patch(ctx, u.GetName(), types.ApplyPatchType, b, metav1.PatchOptions{FieldManager: "kubectl", Force: ptr.To(true), FieldValidation: "Strict"}); err != nil {
			t.Fatalf("apply %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
	for _, u := range objs {
		if first(u) {
			apply(u)
		}
	}
	for _, u := range objs {
		if u.GetKind() != "CustomResourceDefinition" {
			continue
		}
		crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
		waitFor(t, 30*time.Second, "CRD "+u.GetName()+" established", func() (bool, string) {
			got, err := crds.Get(ctx, u.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			return slices.ContainsFunc(conds, func(c any) bool {
				m, _ := c.(map[string]any)
				return m["type"] == "Established" && m["status"] == "True"
			}), fmt.Sprintf("conditions %v", conds)
		})
	}
	mapper.Reset()
	for _, u := range objs {
		if !first(u) {
			apply(u)
		}
	}
}

func deployment(t *testing.T, kube kubernetes.Interface, name string) *appsv1.Deployment {
	t.Helper()
	d, err := kube.AppsV1().Deployments("setpoint-system").Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// flagValues maps each "-name=value" argument's name to its value.
func flagValues(args []string) map[string]string {
	out := map[string]string{}
	for _, a := range args {
		name, value, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		out[name] = value
	}
	return out
}

// containerPort is the number of d's first container's port name.
func containerPort(t *testing.T, d *appsv1.Deployment, name string) string {
	t.Helper()
	for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
		if p.Name == name {
			return strconv.Itoa(int(p.ContainerPort))
		}
	}
	t.Fatalf("deployment %s has no port %s", d.Name, name)
	return ""
}

// mountedFile is the content of the file at path in d's first container:
// the key of the Secret or ConfigMap mounted at path's directory, read
// from the API server.
func mountedFile(t *testing.T, kube kubernetes.Interface, d *appsv1.Deployment, path string) []byte {
	t.Helper()
	ctx := t.Context()
	pod := d.Spec.Template.Spec
	dir, key := filepath.Dir(path), filepath.Base(path)
	i := slices.IndexFunc(pod.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == dir })
	if i < 0 {
		t.Fatalf("deployment %s mounts nothing at %s (for %s)", d.Name, dir, path)
	}
	vname := pod.Containers[0].VolumeMounts[i].Name
	j := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == vname })
	if j < 0 {
		t.Fatalf("deployment %s has no volume %s", d.Name, vname)
	}
	switch v := pod.Volumes[j]; {
	case v.Secret != nil:
		s, err := kube.CoreV1().Secrets(d.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("deployment %s mounts Secret %s: %v", d.Name, v.Secret.SecretName, err)
		}
		if b, ok := s.Data[key]; ok {
			return b
		}
		t.Fatalf("Secret %s has no %s (for %s of deployment %s)", s.Name, key, path, d.Name)
	case v.ConfigMap != nil:
		c, err := kube.CoreV1().ConfigMaps(d.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("deployment %s mounts ConfigMap %s: %v", d.Name, v.ConfigMap.Name, err)
		}
		if s, ok := c.Data[key]; ok {
			return []byte(s)
		}
		t.Fatalf("ConfigMap %s has no %s (for %s of deployment %s)", c.Name, key, path, d.Name)
	}
	t.Fatalf("volume %s of deployment %s is neither a Secret nor a ConfigMap", vname, d.Name)
	return nil
}
