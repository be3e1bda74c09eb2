package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/setpointhq/setpoint/agent"
	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	"github.com/setpointhq/setpoint/internal/kubetest"
)

// Native HPA mode: the agent serves autoscaling/v2 HorizontalPodAutoscalers
// on an API server where no HPA controller runs (no controller manager at
// all, as in every case here but TestNativeStandsDownForTheBuiltInController).

func createHPA(t *testing.T, ns, name string, spec autoscalingv2.HorizontalPodAutoscalerSpec) {
	t.Helper()
	h := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if _, err := env.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(t.Context(), h, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func getHPA(t *testing.T, ns, name string) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	h, err := env.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func hpaCondition(h *autoscalingv2.HorizontalPodAutoscaler, ct autoscalingv2.HorizontalPodAutoscalerConditionType) *autoscalingv2.HorizontalPodAutoscalerCondition {
	for i := range h.Status.Conditions {
		if h.Status.Conditions[i].Type == ct {
			return &h.Status.Conditions[i]
		}
	}
	return nil
}

// hpaText renders an HPA's status for failure messages.
func hpaText(h *autoscalingv2.HorizontalPodAutoscaler) string {
	var b strings.Builder
	fmt.Fprintf(&b, "current=%d desired=%d", h.Status.CurrentReplicas, h.Status.DesiredReplicas)
	for _, c := range h.Status.Conditions {
		fmt.Fprintf(&b, " [%s=%s %s: %s]", c.Type, c.Status, c.Reason, c.Message)
	}
	for _, f := range h.ManagedFields {
		fmt.Fprintf(&b, " {%s %s %s}", f.Manager, f.Subresource, f.Time)
	}
	fmt.Fprintf(&b, " annotations=%v", h.Annotations)
	return b.String()
}

// hpaEvents lists the Events about an HPA as "Source Type Reason Message".
func hpaEvents(t *testing.T, ns, name string) []string {
	t.Helper()
	list, err := env.kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=HorizontalPodAutoscaler,involvedObject.name=" + name,
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Source.Component+" "+e.Type+" "+e.Reason+" "+e.Message)
	}
	return out
}

func waitHPAEvent(t *testing.T, ns, name, prefix string) {
	t.Helper()
	waitFor(t, 15*time.Second, "event "+prefix, func() (bool, string) {
		evs := hpaEvents(t, ns, name)
		for _, e := range evs {
			if strings.HasPrefix(e, prefix) {
				return true, ""
			}
		}
		return false, strings.Join(evs, " | ")
	})
}

// statusManagers lists the field managers of an HPA's status.
func statusManagers(h *autoscalingv2.HorizontalPodAutoscaler) []string {
	var out []string
	for _, f := range h.ManagedFields {
		if f.Subresource == "status" {
			out = append(out, f.Manager)
		}
	}
	return out
}

// An HPA scales its Deployment through Setpoint: 2 pods at 75% of their
// request against a 50% target give 3 replicas, and the HPA reads as the
// built-in controller would write it — status, conditions with the
// controller's messages, current metrics, Events from
// "horizontal-pod-autoscaler" — plus Setpoint's annotations.
func TestNativeHPAScalesDeployment(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "native-up")
	createDeployment(t, ns, "web", 2)
	runningPods(t, ns, "web", 2, "100m", "75m")
	createHPA(t, ns, "web", autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: deploymentRef("web"), MinReplicas: ptr.To[int32](1), MaxReplicas: 10, Metrics: cpuUtilization(50)})
	startAgent(t, ns, agentConfig{serve: agent.ServeHPAs})

	waitReplicas(t, ns, "web", 3, 15*time.Second)
	waitHPAEvent(t, ns, "web", "horizontal-pod-autoscaler Normal SuccessfulRescale New size: 3; reason: cpu resource utilization (percentage of request) above target")
	waitFor(t, 10*time.Second, "the HPA's status after the rescale", func() (bool, string) {
		h := getHPA(t, ns, "web")
		st := h.Status
		ok := st.CurrentReplicas == 3 && st.DesiredReplicas == 3 && st.LastScaleTime != nil &&
			st.ObservedGeneration != nil && *st.ObservedGeneration == h.Generation &&
			len(st.CurrentMetrics) == 1 && st.CurrentMetrics[0].Resource != nil &&
			ptr.Deref(st.CurrentMetrics[0].Resource.Current.AverageUtilization, 0) == 75
		for _, want := range []autoscalingv2.HorizontalPodAutoscalerCondition{
			{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, Reason: "ReadyForNewScale", Message: "recommended size matches current size"},
			{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionTrue, Reason: "ValidMetricFound", Message: "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)"},
			{Type: autoscalingv2.ScalingLimited, Status: corev1.ConditionFalse, Reason: "DesiredWithinRange", Message: "the desired count is within the acceptable range"},
			{Type: autoscalingv2.ScaledToZero, Status: corev1.ConditionFalse, Reason: "NotScaledToZero", Message: "the HPA controller did not scale the workload to zero"},
		} {
			c := hpaCondition(h, want.Type)
			ok = ok && c != nil && c.Status == want.Status && c.Reason == want.Reason && c.Message == want.Message
		}
		// Only the HPA's conditions: none of the agent's.
		ok = ok && len(st.Conditions) == 4
		ok = ok && h.Annotations[agent.DecisionAnnotation] != "" &&
			h.Annotations[agent.ExplanationAnnotation] == "setpointctl explain e2e/"+ns+"/hpa:web"
		return ok, hpaText(h)
	})
	h := getHPA(t, ns, "web")
	if got := statusManagers(h); len(got) != 1 || got[0] != agent.FieldManager {
		t.Errorf("status field managers = %v, want only %s", got, agent.FieldManager)
	}
	if !targetKnown(t, ns, "hpa:web") {
		t.Error("the Setpoint server holds no target hpa:web")
	}
	holdsReplicas(t, ns, "web", 3, 3*syncPeriod)
}

// An HPA and an Autoscaler that select the same pods: the agent, serving
// both kinds, refuses to scale either, as the controller does for two
// HPAs. The pods start at the target: like the controller, the agent
// knows an autoscaler's selector only once it reconciled it, so the first
// of the two to be reconciled may scale before the second is known.
func TestNativeAmbiguousSelectorAcrossKinds(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "native-ambiguous")
	createDeployment(t, ns, "web", 2)
	runningPods(t, ns, "web", 2, "100m", "50m")
	spec := autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: deploymentRef("web"), MinReplicas: ptr.To[int32](1), MaxReplicas: 10, Metrics: cpuUtilization(50)}
	createHPA(t, ns, "web-hpa", spec)
	createAutoscaler(t, ns, "web-spa", v1alpha1.AutoscalerSpec{ScaleTargetRef: spec.ScaleTargetRef, MinReplicas: spec.MinReplicas, MaxReplicas: spec.MaxReplicas, Metrics: spec.Metrics})
	startAgent(t, ns, agentConfig{serve: agent.ServeBoth})

	msg := "pods by selector app=web are controlled by more than one HPA (e.g. [" + ns + "/web-hpa " + ns + "/web-spa])"
	waitFor(t, 15*time.Second, "both autoscalers ambiguous", func() (bool, string) {
		h := getHPA(t, ns, "web-hpa")
		a := autoscaler(t, ns, "web-spa")
		hc, ac := hpaCondition(h, autoscalingv2.ScalingActive), condition(a, autoscalingv2.ScalingActive)
		ok := hc != nil && hc.Reason == "AmbiguousSelector" && hc.Message == msg && ac != nil && ac.Reason == "AmbiguousSelector" && ac.Message == msg
		return ok, hpaText(h) + " | " + statusText(t, ns, "web-spa")
	})
	waitHPAEvent(t, ns, "web-hpa", "horizontal-pod-autoscaler Warning AmbiguousSelector "+msg)
	waitEvent(t, ns, "web-spa", "Warning AmbiguousSelector "+msg)
	setUsage(ns, "web", 2, "75m")
	holdsReplicas(t, ns, "web", 2, 3*syncPeriod)
}

// standingDown reads setpoint_agent_standing_down for namespace/name from
// reg: 1 while the agent stands down for the HPA, 0 when the series is
// absent.
func standingDown(t *testing.T, reg *prometheus.Registry, ns, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "setpoint_agent_standing_down" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == ns && labels["hpa_name"] == name {
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// With kube-controller-manager's HPA controller on, the agent in native
// mode stands down for the HPA it serves (a condition, a Warning Event, a
// metric) and leaves the Deployment to the controller; once the controller
// is off, the agent serves the HPA. It runs alone (not in parallel): the
// controller serves every HPA on the API server.
func TestNativeStandsDownForTheBuiltInController(t *testing.T) {
	ns := newNamespace(t, "native-fight")
	createDeployment(t, ns, "web", 2)
	runningPods(t, ns, "web", 2, "100m", "50m")
	kcm, err := env.cluster.StartControllerManager(t.Context(), kubetest.ControllerManagerOptions{
		Flags: []string{"--horizontal-pod-autoscaler-sync-period=1s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kcm.Stop() })
	createHPA(t, ns, "web", autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: deploymentRef("web"), MinReplicas: ptr.To[int32](1), MaxReplicas: 10, Metrics: cpuUtilization(50)})
	waitFor(t, 20*time.Second, "kube-controller-manager wrote the HPA's status", func() (bool, string) {
		h := getHPA(t, ns, "web")
		return strings.Contains(strings.Join(statusManagers(h), " "), "kube-controller-manager"), hpaText(h)
	})
	// The usage moves within the tolerance, as real usage does: the
	// controller writes the current metrics at each change, never
	// rescaling (50% or 52% of a 50% target).
	ctx, stopUsage := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			usage := "50m"
			if i%2 == 1 {
				usage = "52m"
			}
			setUsage(ns, "web", 2, usage)
			select {
			case <-ctx.Done():
			case <-time.After(700 * time.Millisecond):
			}
		}
	})
	t.Cleanup(func() { stopUsage(); wg.Wait() })

	reg := prometheus.NewRegistry()
	startAgent(t, ns, agentConfig{serve: agent.ServeHPAs, standDown: 5 * time.Second, prometheus: agent.NewMetrics(reg)})
	waitHPAEvent(t, ns, "web", "horizontal-pod-autoscaler Warning "+agent.ReasonAnotherController+` the status of this HorizontalPodAutoscaler is written by "kube-controller-manager"`)
	// While the controller runs, the agent keeps standing down.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		h := getHPA(t, ns, "web")
		if c := hpaCondition(h, agent.ConditionStandingDown); c == nil || c.Status != corev1.ConditionTrue || c.Reason != agent.ReasonAnotherController {
			t.Fatalf("condition %s not held while the controller runs: %s", agent.ConditionStandingDown, hpaText(h))
		}
		if v := standingDown(t, reg, ns, "web"); v != 1 {
			t.Fatalf("setpoint_agent_standing_down = %v, want 1", v)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if targetKnown(t, ns, "hpa:web") {
		t.Error("the agent asked the service for decisions while standing down")
	}

	if err := kcm.Stop(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the agent serves the HPA once the controller is off", func() (bool, string) {
		h := getHPA(t, ns, "web")
		ok := hpaCondition(h, agent.ConditionStandingDown) == nil && h.Annotations[agent.DecisionAnnotation] != "" &&
			standingDown(t, reg, ns, "web") == 0
		return ok, hpaText(h)
	})
	stopUsage()
	wg.Wait()
	setUsage(ns, "web", 2, "75m")
	waitReplicas(t, ns, "web", 3, 15*time.Second)
	waitHPAEvent(t, ns, "web", "horizontal-pod-autoscaler Normal SuccessfulRescale New size: 3; reason: cpu resource utilization (percentage of request) above target")
}

// The agent's rights in deploy/rbac.yaml let it serve HPAs too
// (TestDeployManifestsAndRBAC creates them).
func nativeWithServiceAccount(t *testing.T, ns string) {
	t.Helper()
	createHPA(t, ns, "api", autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: deploymentRef("api"), MinReplicas: ptr.To[int32](1), MaxReplicas: 10, Metrics: cpuUtilization(50)})
	waitReplicas(t, ns, "api", 3, 20*time.Second)
	waitHPAEvent(t, ns, "api", "horizontal-pod-autoscaler Normal SuccessfulRescale New size: 3")
	waitFor(t, 10*time.Second, "annotated", func() (bool, string) {
		h := getHPA(t, ns, "api")
		return h.Annotations[agent.DecisionAnnotation] != "", hpaText(h)
	})
}
