package differential

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	"github.com/setpointhq/setpoint/internal/kubetest"
	"github.com/setpointhq/setpoint/internal/kubetest/metricsserver"
	"github.com/setpointhq/setpoint/internal/testkit"
)

// side says who serves a twin's autoscalers, and on which API server.
type side string

const (
	// kube is the reference: HPAs served by kube-controller-manager.
	kube side = "kube-controller-manager"
	// setpoint is Autoscalers with the same specs, served by a Setpoint
	// agent on the same API server as kube.
	setpoint side = "setpoint"
	// native is the same HPAs on the second API server, served by a
	// Setpoint agent in native mode (-serve=hpas).
	native side = "setpoint-native"
)

// allSides are the twins of a case that names none, the reference first.
var allSides = []side{kube, setpoint, native}

// cluster is the API server the side's twin lives on.
func (s side) cluster() *kubetest.Cluster {
	if s == native {
		return env.native
	}
	return env.withKCM
}

// suffix ends the names of the side's twin namespaces.
func (s side) suffix() string {
	return map[side]string{kube: "k", setpoint: "s", native: "n"}[s]
}

// kind is the kind of one autoscaler object.
type kind string

const (
	hpaKind        kind = "HorizontalPodAutoscaler"
	autoscalerKind kind = "Autoscaler"
)

// load is the metric timeline's state at one step, the same for every
// twin. A nil function leaves that input as it was.
type load struct {
	// cpu is pod i's CPU usage of n pods; "" means metrics-server has no
	// sample.
	cpu func(i, n int) string
	// ready is pod i's readiness; nil means ready.
	ready func(i int) bool
	// started is how long ago pod i started; nil means 10 minutes.
	started func(i int) time.Duration
	// podsMetric is pod i's value of the custom metric "requests"; "" none.
	podsMetric func(i int) string
	// object is the value of "hits" on the Service "app"; "" none.
	object string
	// external is the value of the external metric "queue" (labelled
	// scaledobject.keda.sh/name=app); "" none.
	external string
}

// twin is one namespace of a case: a Deployment "app" (and more targets
// when the case asks), pods played by the test, and the autoscalers.
type twin struct {
	t    *testing.T
	side side
	ns   string
	kube kubernetes.Interface
	dyn  dynamic.Interface
	// targets are the Deployments whose pods the twin plays.
	targets []target
	// kinds are the kinds of the case's autoscalers in this twin, by
	// index.
	kinds []kind
	// played is what play last applied to each target, to skip work
	// when nothing changed, and made how many pods it left; only play's
	// goroutine touches them.
	played map[string]played
	made   map[string]int

	mu   sync.Mutex
	load load
	// version counts the changes of load.
	version int
	// seq is the replica counts "app" went through, without repeats.
	seq []int32
	// handGeneration is the generation of "app" that the last change by
	// hand (scaleByHand) made: an older one is stale for seq.
	handGeneration int64
	// changed wakes play when the load changes.
	changed chan struct{}
}

// played is a target's replica count and load version as play left them.
type played struct {
	replicas int
	version  int
}

// target is one Deployment of a twin: its name and its pods' labels.
type target struct {
	name   string
	labels map[string]string
}

func newTwin(t *testing.T, s side, ns string, targets []target, kinds []kind, replicas int32) *twin {
	t.Helper()
	c := s.cluster()
	w := &twin{t: t, side: s, ns: ns, kube: c.Client(), dyn: c.Dynamic(), targets: targets, kinds: kinds, played: map[string]played{}, made: map[string]int{}, changed: make(chan struct{}, 1)}
	ctx := t.Context()
	if _, err := w.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tg := range targets {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tg.name},
			Spec: appsv1.DeploymentSpec{
				Replicas: &replicas,
				Selector: &metav1.LabelSelector{MatchLabels: tg.labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: tg.labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}},
				},
			},
		}
		if _, err := w.kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tg.name}, Spec: corev1.ServiceSpec{Selector: tg.labels, Ports: []corev1.ServicePort{{Port: 80}}}}
		if _, err := w.kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// set changes the load; the next play applies it.
func (w *twin) set(l load) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l.cpu != nil {
		w.load.cpu = l.cpu
	}
	if l.ready != nil {
		w.load.ready = l.ready
	}
	if l.started != nil {
		w.load.started = l.started
	}
	if l.podsMetric != nil {
		w.load.podsMetric = l.podsMetric
	}
	w.load.object, w.load.external = l.object, l.external
	w.version++
	w.wake()
}

// play is the ReplicaSet and the kubelet: it makes each target's pods match
// its replica count, writes their readiness and start time, and publishes
// their metrics, whenever a Deployment or the load changes. It runs until
// ctx ends.
func (w *twin) play(ctx context.Context) {
	factory := informers.NewSharedInformerFactoryWithOptions(w.kube, 0, informers.WithNamespace(w.ns))
	deployments := factory.Apps().V1().Deployments()
	// Every version of "app" the watch delivers is recorded, so that the
	// sequence has every count even when play is busy.
	seen := func(obj any) {
		if d, ok := obj.(*appsv1.Deployment); ok && d.Name == w.targets[0].name {
			w.record(d)
		}
		w.wake()
	}
	if _, err := deployments.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: seen, UpdateFunc: func(_, o any) { seen(o) }, DeleteFunc: seen,
	}); err != nil {
		w.t.Errorf("%s: watch deployments: %v", w.ns, err)
		return
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	factory.WaitForCacheSync(ctx.Done())
	for ctx.Err() == nil {
		for _, tg := range w.targets {
			d, err := deployments.Lister().Deployments(w.ns).Get(tg.name)
			if err == nil {
				err = w.playTarget(ctx, tg, d)
			}
			if err != nil && ctx.Err() == nil {
				w.t.Logf("%s: play %s: %v", w.ns, tg.name, err)
			}
		}
		select {
		case <-ctx.Done():
		case <-w.changed:
		case <-time.After(time.Second):
		}
	}
}

// wake makes play look again.
func (w *twin) wake() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// record adds the replica count of d, a version of "app", to the sequence
// when it differs from the last.
func (w *twin) record(d *appsv1.Deployment) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := *d.Spec.Replicas
	// A version from before a change by hand is stale for the sequence.
	if d.Generation >= w.handGeneration && (len(w.seq) == 0 || w.seq[len(w.seq)-1] != n) {
		w.seq = append(w.seq, n)
	}
}

// playTarget makes tg's pods and metrics match d's replica count and the
// load.
func (w *twin) playTarget(ctx context.Context, tg target, d *appsv1.Deployment) error {
	n := int(*d.Spec.Replicas)
	w.mu.Lock()
	l, version := w.load, w.version
	w.mu.Unlock()
	now := played{replicas: n, version: version}
	if w.played[tg.name] == now {
		return nil
	}
	// Metrics first, for every pod at once: a pod that does not exist yet
	// is ignored by both sides, and neither reads half a step.
	w.publish(l, tg, n)
	// Pods are made and removed all at once, each complete when the
	// autoscalers first see it, so that no side reads a half-played step.
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	for i := range n {
		wg.Go(func() {
			if err := w.playPod(ctx, tg, fmt.Sprintf("%s-%d", tg.name, i), podStatus(l, i)); err != nil {
				fail(err)
			}
		})
	}
	for i := n; i < w.made[tg.name]; i++ {
		wg.Go(func() {
			name := fmt.Sprintf("%s-%d", tg.name, i)
			err := w.kube.CoreV1().Pods(w.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
			if err != nil && !apierrors.IsNotFound(err) {
				fail(err)
				return
			}
			env.metrics.DeletePodMetrics(w.ns, name)
			env.metrics.DeleteCustomMetric("pods", w.ns, name, "requests")
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	w.made[tg.name] = n
	w.played[tg.name] = now
	return nil
}

// hiddenLabel is the only label of a pod play has created but not yet
// given its status: no selector matches it.
const hiddenLabel = "differential.setpoint.dev/starting"

// playPod makes pod name of tg exist with status want. A new pod is
// created outside tg's selector, given its status, then labelled, so that
// nothing sees it without its status.
func (w *twin) playPod(ctx context.Context, tg target, name string, want corev1.PodStatus) error {
	pods := w.kube.CoreV1().Pods(w.ns)
	p, err := pods.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name, Labels: map[string]string{hiddenLabel: "true"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "app", Image: "example.invalid/app:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("100Mi")}},
			}}},
		}
		if p, err = pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if !sameStatus(p.Status, want) {
		p.Status = want
		if p, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if p.Labels[hiddenLabel] != "" {
		p.Labels = tg.labels
		if _, err = pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// start is a fixed origin for pod start times, so that all twins' pods
// carry the same times and a pod's times do not move between writes.
var start = time.Now().Truncate(time.Second)

// podStatus is the status the kubelet would report for pod i under l.
func podStatus(l load, i int) corev1.PodStatus {
	ready := l.ready == nil || l.ready(i)
	started := 10 * time.Minute
	if l.started != nil {
		started = l.started(i)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	t := start.Add(-started)
	return corev1.PodStatus{
		Phase:      corev1.PodRunning,
		StartTime:  &metav1.Time{Time: t},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(t.Add(5 * time.Second))}},
	}
}

func sameStatus(a, b corev1.PodStatus) bool {
	if a.Phase != b.Phase || a.StartTime == nil || !a.StartTime.Equal(b.StartTime) || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		if a.Conditions[i].Status != b.Conditions[i].Status || !a.Conditions[i].LastTransitionTime.Equal(&b.Conditions[i].LastTransitionTime) {
			return false
		}
	}
	return true
}

// publish sets the metrics of pods 0..n-1 of tg, and the twin's shared
// metrics. The resource metrics of all pods change at once.
func (w *twin) publish(l load, tg target, n int) {
	if l.cpu != nil {
		var set []metricsv1beta1.PodMetrics
		var remove []metav1.ObjectMeta
		for i := range n {
			meta := metav1.ObjectMeta{Namespace: w.ns, Name: fmt.Sprintf("%s-%d", tg.name, i), Labels: tg.labels}
			if v := l.cpu(i, n); v != "" {
				set = append(set, metricsv1beta1.PodMetrics{ObjectMeta: meta, Containers: []metricsv1beta1.ContainerMetrics{{Name: "app",
					Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(v), corev1.ResourceMemory: resource.MustParse("50Mi")}}}})
			} else {
				remove = append(remove, meta)
			}
		}
		env.metrics.ReplacePodMetrics(set, remove)
	}
	for i := range n {
		name := fmt.Sprintf("%s-%d", tg.name, i)
		if l.podsMetric == nil {
			break
		}
		if v := l.podsMetric(i); v != "" {
			env.metrics.SetCustomMetric(metricsserver.CustomMetric{Resource: "pods", Namespace: w.ns, Name: name, Kind: "Pod", APIVersion: "v1",
				Labels: tg.labels, Metric: "requests", Value: resource.MustParse(v)})
		} else {
			env.metrics.DeleteCustomMetric("pods", w.ns, name, "requests")
		}
	}
	if l.object != "" {
		env.metrics.SetCustomMetric(metricsserver.CustomMetric{Resource: "services", Namespace: w.ns, Name: tg.name, Kind: "Service", APIVersion: "v1",
			Metric: "hits", Value: resource.MustParse(l.object)})
	} else {
		env.metrics.DeleteCustomMetric("services", w.ns, tg.name, "hits")
	}
	if l.external != "" {
		env.metrics.SetExternalMetric(metricsserver.ExternalMetric{Namespace: w.ns, Metric: "queue",
			Labels: map[string]string{"scaledobject.keda.sh/name": tg.name}, Value: resource.MustParse(l.external)})
	} else {
		env.metrics.DeleteExternalMetric(w.ns, "queue")
	}
}

// sequence returns the replica counts "app" went through.
func (w *twin) sequence() []int32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seq)
}

// create creates the case's i-th autoscaler, of the twin's kind for it.
func (w *twin) create(i int, spec autoscalingv2.HorizontalPodAutoscalerSpec) error {
	ctx, name := w.t.Context(), autoscalerName(i)
	if w.kinds[i] == hpaKind {
		h := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}, Spec: spec}
		got, err := w.kube.AutoscalingV2().HorizontalPodAutoscalers(w.ns).Create(ctx, h, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		// A field of a disabled feature gate is dropped without a word:
		// the case would then test less than it says.
		if tolerances(spec.Behavior) != tolerances(got.Spec.Behavior) {
			return fmt.Errorf("the API server dropped the scaling tolerances (feature gate HPAConfigurableTolerance off?): sent %s, stored %s",
				tolerances(spec.Behavior), tolerances(got.Spec.Behavior))
		}
		return nil
	}
	a := &v1alpha1.Autoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}, Spec: v1alpha1.AutoscalerSpec{
		ScaleTargetRef: spec.ScaleTargetRef, MinReplicas: spec.MinReplicas, MaxReplicas: spec.MaxReplicas, Metrics: spec.Metrics, Behavior: spec.Behavior}}
	u, err := v1alpha1.ToUnstructured(a)
	if err != nil {
		return err
	}
	_, err = w.dyn.Resource(v1alpha1.AutoscalerResource).Namespace(w.ns).Create(ctx, u, metav1.CreateOptions{})
	return err
}

// tolerances prints the per-direction tolerances of b.
func tolerances(b *autoscalingv2.HorizontalPodAutoscalerBehavior) string {
	q := func(r *autoscalingv2.HPAScalingRules) string {
		if r == nil || r.Tolerance == nil {
			return "-"
		}
		return r.Tolerance.String()
	}
	if b == nil {
		return "up - down -"
	}
	return "up " + q(b.ScaleUp) + " down " + q(b.ScaleDown)
}

// observed is what a user sees of one autoscaler: `kubectl get` and
// `kubectl describe` of it, and the replicas of its target.
type observed struct {
	Replicas        int32
	CurrentReplicas int32
	Desired         int32
	// Scaled says whether the status has a last scale time.
	Scaled         bool
	Conditions     []string
	CurrentMetrics []autoscalingv2.MetricStatus
	// Events are the distinct "type reason message" lines.
	Events []string
	// EventSources are the distinct sources of the Events as `kubectl
	// describe` prints them (its From column). An Autoscaler's differ
	// from an HPA's by design, so they are compared between HPAs only.
	EventSources []string
}

// hpaConditions are the condition types the HPA controller writes; the
// agent's own (ServiceAvailable, Paused) are not compared.
var hpaConditions = []autoscalingv2.HorizontalPodAutoscalerConditionType{autoscalingv2.AbleToScale, autoscalingv2.ScalingActive, autoscalingv2.ScalingLimited, autoscalingv2.ScaledToZero}

// observe reads the state of the case's i-th autoscaler.
func (w *twin) observe(ctx context.Context, i int, targetName string) (observed, error) {
	var o observed
	name := autoscalerName(i)
	d, err := w.kube.AppsV1().Deployments(w.ns).Get(ctx, targetName, metav1.GetOptions{})
	if err != nil {
		return o, err
	}
	o.Replicas = *d.Spec.Replicas
	var conds []autoscalingv2.HorizontalPodAutoscalerCondition
	var last *metav1.Time
	switch w.kinds[i] {
	case hpaKind:
		h, err := w.kube.AutoscalingV2().HorizontalPodAutoscalers(w.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return o, err
		}
		s := h.Status
		o.CurrentReplicas, o.Desired, o.CurrentMetrics, conds, last = s.CurrentReplicas, s.DesiredReplicas, s.CurrentMetrics, s.Conditions, s.LastScaleTime
	case autoscalerKind:
		u, err := w.dyn.Resource(v1alpha1.AutoscalerResource).Namespace(w.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return o, err
		}
		a, err := v1alpha1.FromUnstructured(u)
		if err != nil {
			return o, err
		}
		s := a.Status
		o.CurrentReplicas, o.Desired, o.CurrentMetrics, conds, last = s.CurrentReplicas, s.DesiredReplicas, s.CurrentMetrics, s.Conditions, s.LastScaleTime
	}
	o.Scaled = last != nil
	for _, c := range conds {
		if slices.Contains(hpaConditions, c.Type) {
			o.Conditions = append(o.Conditions, w.normalize(fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)))
		}
	}
	sort.Strings(o.Conditions)
	list, err := w.kube.CoreV1().Events(w.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=" + string(w.kinds[i]) + ",involvedObject.name=" + name})
	if err != nil {
		return o, err
	}
	for _, e := range list.Items {
		line := w.normalize(e.Type + " " + e.Reason + " " + e.Message)
		if !slices.Contains(o.Events, line) {
			o.Events = append(o.Events, line)
		}
		if from := eventSource(e); w.kinds[i] == hpaKind && !slices.Contains(o.EventSources, from) {
			o.EventSources = append(o.EventSources, from)
		}
	}
	sort.Strings(o.Events)
	sort.Strings(o.EventSources)
	return o, nil
}

// eventSource is the From column of `kubectl describe` for e: the
// component, and the host or reporting instance when there is one.
func eventSource(e corev1.Event) string {
	component, host := e.Source.Component, e.Source.Host
	if component == "" {
		component = e.ReportingController
	}
	if host == "" {
		host = e.ReportingInstance
	}
	if host == "" {
		return component
	}
	return component + ", " + host
}

// exampleList is the list of autoscalers an AmbiguousSelector message
// names: "(e.g. [ns/a ns/b])".
var exampleList = regexp.MustCompile(`\(e\.g\. \[([^\]]*)\]\)`)

// normalize makes a message comparable across the twins: the twin's
// namespace becomes "<ns>", and the autoscalers an AmbiguousSelector message
// names are sorted (the controller lists them in map order, which varies
// from one sync to the next).
func (w *twin) normalize(s string) string {
	s = strings.ReplaceAll(s, w.ns+"/", "<ns>/")
	return exampleList.ReplaceAllStringFunc(s, func(m string) string {
		keys := strings.Fields(exampleList.FindStringSubmatch(m)[1])
		sort.Strings(keys)
		return "(e.g. [" + strings.Join(keys, " ") + "])"
	})
}

// waitSynced waits until the case's i-th autoscaler has a ScalingActive
// condition.
func (w *twin) waitSynced(i int, targetName string) {
	w.t.Helper()
	testkit.Eventually(w.t, 30*time.Second*env.scale, w.ns+"/"+autoscalerName(i)+" synced", func() error {
		o, err := w.observe(w.t.Context(), i, targetName)
		if err != nil {
			return err
		}
		for _, c := range o.Conditions {
			if strings.HasPrefix(c, string(autoscalingv2.ScalingActive)+"=") {
				return nil
			}
		}
		return fmt.Errorf("no %s condition yet: %v", autoscalingv2.ScalingActive, o.Conditions)
	})
}

// scaleByHand sets the replica count of "app", as a user would, and
// records it in the sequence (the autoscaler may undo it before the next
// play notices).
func (w *twin) scaleByHand(replicas int32) {
	w.t.Helper()
	ctx := w.t.Context()
	w.mu.Lock()
	defer w.mu.Unlock()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := w.kube.AppsV1().Deployments(w.ns).Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Replicas = &replicas
		if d, err = w.kube.AppsV1().Deployments(w.ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			return err
		}
		w.handGeneration = d.Generation
		return nil
	})
	if err != nil {
		w.t.Fatal(err)
	}
	w.seq = append(w.seq, replicas)
}

// quantities compares resource quantities by their canonical string, as
// kubectl prints them.
var quantities = cmp.Transformer("quantity", func(q resource.Quantity) string { return q.String() })
