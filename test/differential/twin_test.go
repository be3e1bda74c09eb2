package differential

import (
	"context"
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
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/setpointhq/setpoint/agent"
	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	"github.com/setpointhq/setpoint/internal/kubetest/metricsserver"
	"github.com/setpointhq/setpoint/internal/testkit"
)

// side says who serves a twin namespace.
type side string

const (
	kube     side = "kube-controller-manager"
	setpoint side = "setpoint"
)

// load is the metric timeline's state at one step, the same for both twins.
// A nil function leaves that input as it was.
type load struct {
	// cpu is pod i's CPU usage; "" means metrics-server has no sample.
	cpu func(i int) string
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
// when the case asks), pods played by the test, and the autoscaler(s).
type twin struct {
	t    *testing.T
	side side
	ns   string
	// targets are the Deployments whose pods the twin plays.
	targets []target

	mu   sync.Mutex
	load load
	// seq is the replica counts "app" went through, without repeats.
	seq []int32
	// hand counts the changes by hand (scaleByHand).
	hand int
}

// target is one Deployment of a twin: its name and its pods' labels.
type target struct {
	name   string
	labels map[string]string
}

func newTwin(t *testing.T, s side, ns string, targets []target, replicas int32) *twin {
	t.Helper()
	w := &twin{t: t, side: s, ns: ns, targets: targets}
	ctx := t.Context()
	if _, err := env.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
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
		if _, err := env.kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tg.name}, Spec: corev1.ServiceSpec{Selector: tg.labels, Ports: []corev1.ServicePort{{Port: 80}}}}
		if _, err := env.kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
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
}

// play is the ReplicaSet and the kubelet: it makes each target's pods match
// its replica count, writes their readiness and start time, and publishes
// their metrics. It runs until ctx ends.
func (w *twin) play(ctx context.Context) {
	for ctx.Err() == nil {
		for i, tg := range w.targets {
			if err := w.playTarget(ctx, tg, i == 0); err != nil && ctx.Err() == nil {
				w.t.Logf("%s: play %s: %v", w.ns, tg.name, err)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (w *twin) playTarget(ctx context.Context, tg target, first bool) error {
	w.mu.Lock()
	hand := w.hand
	w.mu.Unlock()
	d, err := env.kube.AppsV1().Deployments(w.ns).Get(ctx, tg.name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	n := int(*d.Spec.Replicas)
	if first {
		w.mu.Lock()
		// A read from before a change by hand is stale for the sequence.
		if hand == w.hand && (len(w.seq) == 0 || w.seq[len(w.seq)-1] != int32(n)) {
			w.seq = append(w.seq, int32(n))
		}
		w.mu.Unlock()
	}
	w.mu.Lock()
	l := w.load
	w.mu.Unlock()
	// Metrics first, for every pod at once: a pod that does not exist yet
	// is ignored by both sides, and neither reads half a step.
	w.publish(l, tg, n)
	pods := env.kube.CoreV1().Pods(w.ns)
	for i := range n {
		name := fmt.Sprintf("%s-%d", tg.name, i)
		want := podStatus(l, i)
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name, Labels: tg.labels},
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
			if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
	}
	for i := n; ; i++ {
		name := fmt.Sprintf("%s-%d", tg.name, i)
		err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		if apierrors.IsNotFound(err) {
			break
		}
		if err != nil {
			return err
		}
		env.metrics.DeletePodMetrics(w.ns, name)
		env.metrics.DeleteCustomMetric("pods", w.ns, name, "requests")
	}
	return nil
}

// start is a fixed origin for pod start times, so that both twins' pods
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
			if v := l.cpu(i); v != "" {
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

// observed is what a user sees of one autoscaler: `kubectl get` and
// `kubectl describe` of it.
type observed struct {
	Replicas       int32
	Desired        int32
	Conditions     []string
	CurrentMetrics []autoscalingv2.MetricStatus
	Events         []string
}

// hpaConditions are the condition types the HPA controller writes; the
// agent's own (ServiceAvailable, Paused) are not compared.
var hpaConditions = []autoscalingv2.HorizontalPodAutoscalerConditionType{autoscalingv2.AbleToScale, autoscalingv2.ScalingActive, autoscalingv2.ScalingLimited, autoscalingv2.ScaledToZero}

// observe reads the autoscaler name's state.
func (w *twin) observe(ctx context.Context, name, targetName string) (observed, error) {
	var o observed
	d, err := env.kube.AppsV1().Deployments(w.ns).Get(ctx, targetName, metav1.GetOptions{})
	if err != nil {
		return o, err
	}
	o.Replicas = *d.Spec.Replicas
	var conds []autoscalingv2.HorizontalPodAutoscalerCondition
	kind := "HorizontalPodAutoscaler"
	switch w.side {
	case kube:
		h, err := env.kube.AutoscalingV2().HorizontalPodAutoscalers(w.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return o, err
		}
		o.Desired, o.CurrentMetrics, conds = h.Status.DesiredReplicas, h.Status.CurrentMetrics, h.Status.Conditions
	case setpoint:
		kind = "Autoscaler"
		u, err := env.dyn.Resource(v1alpha1.AutoscalerResource).Namespace(w.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return o, err
		}
		a, err := v1alpha1.FromUnstructured(u)
		if err != nil {
			return o, err
		}
		o.Desired, o.CurrentMetrics, conds = a.Status.DesiredReplicas, a.Status.CurrentMetrics, a.Status.Conditions
	}
	for _, c := range conds {
		if slices.Contains(hpaConditions, c.Type) {
			o.Conditions = append(o.Conditions, w.normalize(fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)))
		}
	}
	sort.Strings(o.Conditions)
	list, err := env.kube.CoreV1().Events(w.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=" + kind + ",involvedObject.name=" + name})
	if err != nil {
		return o, err
	}
	for _, e := range list.Items {
		line := w.normalize(e.Type + " " + e.Reason + " " + e.Message)
		if !slices.Contains(o.Events, line) {
			o.Events = append(o.Events, line)
		}
	}
	sort.Strings(o.Events)
	return o, nil
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

// quantities compares resource quantities by their canonical string, as
// kubectl prints them.
var quantities = cmp.Transformer("quantity", func(q resource.Quantity) string { return q.String() })

// differenceCase is one side-by-side case.
type differenceCase struct {
	name string
	// replicas is each target's replica count at the start.
	replicas int32
	// targets are the Deployments; nil means one, "app" with app=<name>.
	targets []target
	// autoscalers are the specs, one autoscaler each, named after their
	// index ("app", "app-2", ...); the first watches "app".
	autoscalers []autoscalingv2.HorizontalPodAutoscalerSpec
	// steps is the timeline.
	steps []step
}

// step is one point of a case's timeline.
type step struct {
	what string
	load load
	// scale sets the replica count of "app" by hand first (0 leaves it).
	scale int32
}

// autoscalerName is the name of a case's i-th autoscaler.
func autoscalerName(i int) string {
	if i == 0 {
		return "app"
	}
	return fmt.Sprintf("app-%d", i+1)
}

// run runs the case on twin namespaces and compares them after each step.
func (c differenceCase) run(t *testing.T, addr string) {
	t.Parallel()
	targets := c.targets
	if targets == nil {
		targets = []target{{name: "app", labels: map[string]string{"app": c.name}}}
	}
	twins := map[side]*twin{
		kube:     newTwin(t, kube, c.name+"-k", targets, c.replicas),
		setpoint: newTwin(t, setpoint, c.name+"-s", targets, c.replicas),
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, w := range twins {
		w.set(c.steps[0].load)
		// The first pods and their metrics exist before the autoscalers,
		// so that neither side starts by reading a half-built twin.
		for i, tg := range w.targets {
			if err := w.playTarget(t.Context(), tg, i == 0); err != nil {
				t.Fatal(err)
			}
		}
		wg.Go(func() { w.play(ctx) })
	}
	startAgent(t, twins[setpoint].ns, addr)
	for i, spec := range c.autoscalers {
		name := autoscalerName(i)
		h := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: twins[kube].ns, Name: name}, Spec: spec}
		if _, err := env.kube.AutoscalingV2().HorizontalPodAutoscalers(h.Namespace).Create(t.Context(), h, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		a := &v1alpha1.Autoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: twins[setpoint].ns, Name: name}, Spec: v1alpha1.AutoscalerSpec{
			ScaleTargetRef: spec.ScaleTargetRef, MinReplicas: spec.MinReplicas, MaxReplicas: spec.MaxReplicas, Metrics: spec.Metrics, Behavior: spec.Behavior}}
		u, err := v1alpha1.ToUnstructured(a)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := env.dyn.Resource(v1alpha1.AutoscalerResource).Namespace(a.Namespace).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Which of several autoscalers syncs first is up to timing; each
		// is seen by both sides before the next exists.
		if len(c.autoscalers) > 1 {
			for _, w := range twins {
				w.waitSynced(name, spec.ScaleTargetRef.Name)
			}
		}
	}
	for i, s := range c.steps {
		if i > 0 {
			for _, w := range twins {
				w.set(s.load)
			}
		}
		if s.scale > 0 {
			for _, w := range twins {
				w.scaleByHand(s.scale)
			}
		}
		c.settle(t, twins, s.what)
	}
	k, sp := twins[kube].sequence(), twins[setpoint].sequence()
	if !slices.Equal(k, sp) {
		t.Errorf("replica sequences differ:\n  %s: %v\n  %s: %v", kube, k, setpoint, sp)
	} else {
		t.Logf("replica sequence %v", k)
	}
	checkFieldManagers(t, twins[setpoint].ns, len(sp) > 1)
}

// checkFieldManagers checks that the agent's writes carry its field
// manager: the Autoscaler's status and, when it rescaled, the target's scale.
func checkFieldManagers(t *testing.T, ns string, rescaled bool) {
	t.Helper()
	u, err := env.dyn.Resource(v1alpha1.AutoscalerResource).Namespace(ns).Get(t.Context(), "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !managedBy(u.GetManagedFields(), agent.FieldManager, "status") {
		t.Errorf("Autoscaler %s/app: no status fields managed by %q", ns, agent.FieldManager)
	}
	if !rescaled {
		return
	}
	d, err := env.kube.AppsV1().Deployments(ns).Get(t.Context(), "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !managedBy(d.GetManagedFields(), agent.FieldManager, "scale") {
		t.Errorf("Deployment %s/app: no scale fields managed by %q", ns, agent.FieldManager)
	}
}

func managedBy(fields []metav1.ManagedFieldsEntry, manager, subresource string) bool {
	return slices.ContainsFunc(fields, func(f metav1.ManagedFieldsEntry) bool { return f.Manager == manager && f.Subresource == subresource })
}

// settle waits until both twins have held the same state for three sync
// periods and the default scale-down window, and fails with the difference when that does not happen in time.
func (c differenceCase) settle(t *testing.T, twins map[side]*twin, what string) {
	t.Helper()
	s := env.settings
	// Holding longer than the default scale-down window lets a pending
	// scale-down happen before the step counts as settled.
	hold := max(3*s.sync, s.downscaleStabilizing+2*s.sync)
	deadline := time.Now().Add(30*time.Second*env.scale + s.downscaleStabilizing)
	var since time.Time
	var last string
	for time.Now().Before(deadline) {
		diff, err := c.compare(t.Context(), twins)
		switch {
		case err != nil:
			last, since = err.Error(), time.Time{}
		case diff != "":
			last, since = diff, time.Time{}
		case since.IsZero():
			since = time.Now()
		case time.Since(since) >= hold:
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("step %q: the twins did not settle to the same state: %s", what, last)
}

// compare reports the difference between the twins' observed states, or "".
func (c differenceCase) compare(ctx context.Context, twins map[side]*twin) (string, error) {
	var diffs []string
	for i, spec := range c.autoscalers {
		name := autoscalerName(i)
		k, err := twins[kube].observe(ctx, name, spec.ScaleTargetRef.Name)
		if err != nil {
			return "", err
		}
		sp, err := twins[setpoint].observe(ctx, name, spec.ScaleTargetRef.Name)
		if err != nil {
			return "", err
		}
		if d := cmp.Diff(k, sp, quantities); d != "" {
			diffs = append(diffs, fmt.Sprintf("%s (-%s +%s):\n%s", name, kube, setpoint, d))
		}
	}
	return strings.Join(diffs, "\n"), nil
}

// waitSynced waits until the autoscaler name has a ScalingActive condition.
func (w *twin) waitSynced(name, targetName string) {
	w.t.Helper()
	testkit.Eventually(w.t, 30*time.Second*env.scale, name+" synced", func() error {
		o, err := w.observe(w.t.Context(), name, targetName)
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
	sc, err := env.kube.AppsV1().Deployments(w.ns).GetScale(ctx, "app", metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	sc.Spec.Replicas = replicas
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := env.kube.AppsV1().Deployments(w.ns).UpdateScale(ctx, "app", sc, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	w.seq = append(w.seq, replicas)
	w.hand++
}
