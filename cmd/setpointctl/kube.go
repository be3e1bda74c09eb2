package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// fieldManager names setpointctl in the objects' managed fields.
const fieldManager = "setpointctl"

// ImportedFromAnnotation records on an imported Autoscaler the
// HorizontalPodAutoscaler it was made from.
const ImportedFromAnnotation = "setpoint.dev/imported-from"

// kubeFlags select the cluster, as kubectl's flags do.
type kubeFlags struct {
	kubeconfig, context, namespace string
}

func (k *kubeFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&k.context, "context", "", "kubeconfig context (default: the current one)")
	fs.StringVarP(&k.namespace, "namespace", "n", "", "namespace (default: the context's)")
}

// kube is a connection to a cluster.
type kube struct {
	namespace string
	dyn       dynamic.Interface
	typed     kubernetes.Interface
	disc      discovery.DiscoveryInterface
}

func (k *kubeFlags) connect() (*kube, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: k.context})
	cfg, err := cc.ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		where := "$KUBECONFIG or ~/.kube/config"
		if k.kubeconfig != "" {
			where = k.kubeconfig
		}
		return nil, fmt.Errorf("no cluster to talk to: no kubeconfig found (looked at %s).\nPoint --kubeconfig at one, or create a local cluster first (kind create cluster, or k3s)", where)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("kubeconfig %s does not exist: point --kubeconfig at your cluster's (kind and k3s write one), or drop --kubeconfig to use $KUBECONFIG or ~/.kube/config", k.kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	ns := k.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, err
		}
	}
	out := &kube{namespace: ns}
	if out.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if out.typed, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	out.disc = out.typed.Discovery()
	return out, nil
}

func autoscaleCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "autoscale KIND/NAME --max N [--min N] [--cpu-percent P]",
		GroupID: "cluster",
		Short:   "Create an Autoscaler for a workload, like kubectl autoscale",
		Long: `Create the agent's Autoscaler (setpoint.dev/v1alpha1) for a workload, as
kubectl autoscale creates a HorizontalPodAutoscaler. KIND is a kind,
resource or short name of anything with a scale subresource (deployment,
deploy, statefulsets.apps, a custom resource).`,
		Example: `  setpointctl autoscale deployment/web --min 2 --max 10 --cpu-percent 60
  setpointctl autoscale statefulset/db -n data --max 5 --dry-run`,
		Args: exactArgs(1, "one workload, KIND/NAME"),
	}
	var kf kubeFlags
	kf.register(cmd.Flags())
	min := cmd.Flags().Int("min", -1, "lower replica limit (default: the API's, 1)")
	max := cmd.Flags().Int("max", -1, "upper replica limit (required)")
	cpu := cmd.Flags().Int("cpu-percent", -1, "target average CPU utilization, in percent of the pods' requests (default: none given, the API's 80%)")
	name := cmd.Flags().String("name", "", "the Autoscaler's name (default: the workload's)")
	dryRun := cmd.Flags().Bool("dry-run", false, "print the Autoscaler instead of creating it")
	cmd.RunE = localRun(func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		if *max < 1 {
			return usagef(cmd, "autoscale needs --max N, the upper replica limit (at least 1), e.g. %s", exampleOf(cmd))
		}
		if *min > *max {
			return usagef(cmd, "--min %d is above --max %d", *min, *max)
		}
		if *cpu == 0 || *cpu < -1 {
			return usagef(cmd, "--cpu-percent must be positive, e.g. --cpu-percent 60")
		}
		kindName := strings.SplitN(args[0], "/", 2)
		if len(kindName) != 2 || kindName[0] == "" || kindName[1] == "" {
			return usagef(cmd, "%q is not a workload: want KIND/NAME, e.g. deployment/web", args[0])
		}
		k, err := kf.connect()
		if err != nil {
			return err
		}
		gvk, err := k.scalable(ctx, kindName[0], kindName[1])
		if err != nil {
			return fmt.Errorf("autoscale: %w", err)
		}
		a := &v1alpha1.Autoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: kindName[1], Namespace: k.namespace},
			Spec: v1alpha1.AutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: kindName[1]},
				MaxReplicas:    int32(*max),
			},
		}
		if *name != "" {
			a.Name = *name
		}
		if *min >= 0 {
			a.Spec.MinReplicas = new(int32(*min))
		}
		if *cpu > 0 {
			a.Spec.Metrics = []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{
					Type: autoscalingv2.UtilizationMetricType, AverageUtilization: new(int32(*cpu)),
				}},
			}}
		}
		u, err := object(a)
		if err != nil {
			return err
		}
		if *dryRun {
			return writeYAML(e.stdout, []*unstructured.Unstructured{u})
		}
		if _, err := k.dyn.Resource(v1alpha1.AutoscalerResource).Namespace(k.namespace).Create(ctx, u, metav1.CreateOptions{FieldManager: fieldManager}); err != nil {
			return fmt.Errorf("autoscale: %w", err)
		}
		_, err = fmt.Fprintf(e.stdout, "autoscaler.%s/%s autoscaled\n", v1alpha1.Group, a.Name)
		return err
	})
	return cmd
}

// scalable resolves KIND (a kind, resource or short name, optionally with
// its group: "deploy", "deployments.apps", "Widget") and checks that NAME
// exists in the namespace; it returns the object's kind.
func (k *kube) scalable(ctx context.Context, kind, name string) (schema.GroupVersionKind, error) {
	mapper := restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(k.disc)), k.disc, nil)
	gvr, gr := schema.ParseResourceArg(strings.ToLower(kind))
	var err error
	if gvr == nil {
		var r schema.GroupVersionResource
		if r, err = mapper.ResourceFor(gr.WithVersion("")); err != nil {
			return schema.GroupVersionKind{}, err
		}
		gvr = &r
	}
	gvk, err := mapper.KindFor(*gvr)
	if err != nil {
		return gvk, err
	}
	if _, err := k.dyn.Resource(*gvr).Namespace(k.namespace).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return gvk, fmt.Errorf("there is no %s %q in namespace %s ('kubectl get %s -n %s' lists them; -n picks another namespace): %w", gvr.Resource, name, k.namespace, gvr.Resource, k.namespace, err)
	} else if err != nil {
		return gvk, err
	}
	return gvk, nil
}

// object is an Autoscaler in the dynamic client's form, without status or
// server-set metadata.
func object(a *v1alpha1.Autoscaler) (*unstructured.Unstructured, error) {
	u, err := v1alpha1.ToUnstructured(a)
	if err != nil {
		return nil, err
	}
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

// writeYAML writes objects as YAML documents separated by "---".
func writeYAML(w io.Writer, objs []*unstructured.Unstructured) error {
	for i, u := range objs {
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return err
		}
		if i > 0 {
			io.WriteString(w, "---\n")
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

func importHPACmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "import-hpa [NAME...] [-n NS | -A] [-f FILE] [--apply]",
		GroupID: "cluster",
		Short:   "Turn HorizontalPodAutoscalers into Autoscalers (print, or apply)",
		Long: `Turn HorizontalPodAutoscalers (autoscaling/v2 or v1) into the agent's
Autoscalers with the same name, namespace, labels and spec. Without --apply
it prints them; with --apply it creates or updates them in the cluster by
server-side apply. Delete each HPA afterwards, so that only the agent scales.`,
		Example: `  setpointctl import-hpa -A
  setpointctl import-hpa web api -n shop --apply
  setpointctl import-hpa -f hpas.yaml > autoscalers.yaml`,
	}
	var kf kubeFlags
	kf.register(cmd.Flags())
	file := fileFlag(cmd, "read HorizontalPodAutoscalers (autoscaling/v2 or v1, YAML or JSON, lists too) from this file instead of the cluster; - reads stdin")
	all := cmd.Flags().BoolP("all-namespaces", "A", false, "every namespace (from the cluster)")
	apply := cmd.Flags().Bool("apply", false, "create or update the Autoscalers in the cluster (server-side apply) instead of printing them")
	cmd.RunE = localRun(func(cmd *cobra.Command, names []string) error {
		ctx := cmd.Context()
		var (
			k    *kube
			hpas []autoscalingv2.HorizontalPodAutoscaler
			err  error
		)
		if *file == "" || *apply {
			if k, err = kf.connect(); err != nil {
				return err
			}
		}
		if *file != "" {
			if hpas, err = readHPAs(e.stdin, *file); err != nil {
				return err
			}
			hpas = selectNames(hpas, names)
		} else {
			if hpas, err = k.listHPAs(ctx, *all, names); err != nil {
				return err
			}
		}
		if len(hpas) == 0 {
			return errors.New("import-hpa: no HorizontalPodAutoscaler found")
		}
		var objs []*unstructured.Unstructured
		for i := range hpas {
			u, err := object(FromHPA(&hpas[i]))
			if err != nil {
				return err
			}
			if *apply && u.GetNamespace() == "" {
				u.SetNamespace(k.namespace)
			}
			objs = append(objs, u)
		}
		if !*apply {
			return writeYAML(e.stdout, objs)
		}
		for i, u := range objs {
			_, err := k.dyn.Resource(v1alpha1.AutoscalerResource).Namespace(u.GetNamespace()).Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
			if err != nil {
				return fmt.Errorf("import-hpa: %s/%s: %w", u.GetNamespace(), u.GetName(), err)
			}
			fmt.Fprintf(e.stdout, "autoscaler.%s/%s imported (namespace %s)\n", v1alpha1.Group, u.GetName(), u.GetNamespace())
			fmt.Fprintf(e.stderr, "note: the HorizontalPodAutoscaler %s/%s still scales %s/%s: delete it (kubectl delete hpa -n %s %s) so that only the agent does\n",
				hpas[i].Namespace, hpas[i].Name, hpas[i].Spec.ScaleTargetRef.Kind, hpas[i].Spec.ScaleTargetRef.Name, hpas[i].Namespace, hpas[i].Name)
		}
		return nil
	})
	return cmd
}

// listHPAs reads HorizontalPodAutoscalers from the cluster: the named
// ones, or every one of the namespace (all: of every namespace).
func (k *kube) listHPAs(ctx context.Context, all bool, names []string) ([]autoscalingv2.HorizontalPodAutoscaler, error) {
	if len(names) > 0 {
		if all {
			return nil, errors.New("import-hpa: names and -A exclude each other")
		}
		var out []autoscalingv2.HorizontalPodAutoscaler
		for _, n := range names {
			h, err := k.typed.AutoscalingV2().HorizontalPodAutoscalers(k.namespace).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			out = append(out, *h)
		}
		return out, nil
	}
	ns := k.namespace
	if all {
		ns = metav1.NamespaceAll
	}
	list, err := k.typed.AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// readHPAs reads every HorizontalPodAutoscaler of a YAML or JSON file:
// single objects or lists, autoscaling/v2 or autoscaling/v1.
func readHPAs(stdin io.Reader, path string) ([]autoscalingv2.HorizontalPodAutoscaler, error) {
	var r io.Reader = stdin
	if path != "-" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var out []autoscalingv2.HorizontalPodAutoscaler
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if obj == nil {
			continue // an empty document
		}
		u := &unstructured.Unstructured{Object: obj}
		items := []unstructured.Unstructured{*u}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			items = list.Items
		}
		for _, it := range items {
			h, err := hpaOf(&it)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			out = append(out, *h)
		}
	}
}

// hpaOf reads an autoscaling/v2 or autoscaling/v1 HorizontalPodAutoscaler.
func hpaOf(u *unstructured.Unstructured) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	if u.GetKind() != "HorizontalPodAutoscaler" {
		return nil, fmt.Errorf("%s %q is not a HorizontalPodAutoscaler", u.GetKind(), u.GetName())
	}
	switch u.GetAPIVersion() {
	case "autoscaling/v2":
		var h autoscalingv2.HorizontalPodAutoscaler
		err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, &h, true)
		return &h, err
	case "autoscaling/v1":
		var h1 autoscalingv1.HorizontalPodAutoscaler
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, &h1, true); err != nil {
			return nil, err
		}
		h := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: h1.ObjectMeta, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference(h1.Spec.ScaleTargetRef),
			MinReplicas:    h1.Spec.MinReplicas,
			MaxReplicas:    h1.Spec.MaxReplicas,
		}}
		if p := h1.Spec.TargetCPUUtilizationPercentage; p != nil {
			h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: p},
			}}}
		}
		return h, nil
	}
	return nil, fmt.Errorf("HorizontalPodAutoscaler %q: apiVersion %q: want autoscaling/v2 or autoscaling/v1", u.GetName(), u.GetAPIVersion())
}

func selectNames(hpas []autoscalingv2.HorizontalPodAutoscaler, names []string) []autoscalingv2.HorizontalPodAutoscaler {
	if len(names) == 0 {
		return hpas
	}
	var out []autoscalingv2.HorizontalPodAutoscaler
	for _, h := range hpas {
		for _, n := range names {
			if h.Name == n {
				out = append(out, h)
			}
		}
	}
	return out
}

// FromHPA is the Autoscaler that does what h does: the same name,
// namespace, labels and spec (scale target, limits, metrics, behavior),
// annotated with where it came from.
func FromHPA(h *autoscalingv2.HorizontalPodAutoscaler) *v1alpha1.Autoscaler {
	return &v1alpha1.Autoscaler{
		ObjectMeta: metav1.ObjectMeta{
			Name:        h.Name,
			Namespace:   h.Namespace,
			Labels:      h.Labels,
			Annotations: map[string]string{ImportedFromAnnotation: "HorizontalPodAutoscaler/" + h.Name},
		},
		Spec: v1alpha1.AutoscalerSpec{
			ScaleTargetRef: h.Spec.ScaleTargetRef,
			MinReplicas:    h.Spec.MinReplicas,
			MaxReplicas:    h.Spec.MaxReplicas,
			Metrics:        h.Spec.Metrics,
			Behavior:       h.Spec.Behavior,
		},
	}
}
