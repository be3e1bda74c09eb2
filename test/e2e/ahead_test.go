package e2e

import (
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/setpointhq/setpoint/agent"
	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	"github.com/setpointhq/setpoint/internal/kubetest/metricsserver"
)

// queueWorkload makes a namespace named after prefix with Deployments of
// the apps, each with 2 running pods, and an External metric of value 20
// in it; it returns the namespace and the metric's name.
func queueWorkload(t *testing.T, prefix string, apps ...string) (ns, metric string) {
	t.Helper()
	ns = newNamespace(t, prefix)
	metric = strings.ReplaceAll(prefix, "-", "_") + "_queue"
	env.metrics.SetExternalMetric(metricsserver.ExternalMetric{Namespace: ns, Metric: metric, Value: resource.MustParse("20")})
	for _, app := range apps {
		createDeployment(t, ns, app, 2)
		runningPods(t, ns, app, 2, "100m", "50m")
	}
	return ns, metric
}

// queueMetric is an External metric of name asking for value/10 replicas.
func queueMetric(name string) []autoscalingv2.MetricSpec {
	return []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: name},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))}}}}
}

// An Autoscaler's fallback through a metric outage, from the CRD to the
// target's Scale: the queue metric keeps 2 replicas; when its source fails
// the count is held for failureDuration, then the fallback's 5 applies
// (FallbackActive=True); when the source recovers the metric's 2 is back
// (FallbackActive=False).
func TestFallbackThroughMetricOutage(t *testing.T) {
	t.Parallel()
	ns, metric := queueWorkload(t, "ahead-fallback", "web")
	createAutoscaler(t, ns, "web", v1alpha1.AutoscalerSpec{ScaleTargetRef: deploymentRef("web"), MinReplicas: ptr.To[int32](1), MaxReplicas: 10, Metrics: queueMetric(metric),
		Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)}},
		Fallback: &v1alpha1.Fallback{FailureDuration: &metav1.Duration{Duration: 3 * syncPeriod}, Behavior: "static", Replicas: 5}})
	startAgent(t, ns, agentConfig{})
	waitCondition(t, ns, "web", autoscalingv2.ScalingActive, corev1.ConditionTrue, "", "")
	holdsReplicas(t, ns, "web", 2, 2*syncPeriod)
	if c := condition(autoscaler(t, ns, "web"), "FallbackActive"); c != nil {
		t.Errorf("FallbackActive %+v while the metrics are healthy", c)
	}

	// From the moment the source fails: the service cannot see the failure
	// sooner, so the fallback cannot apply before failureDuration has
	// passed since then, however late a loaded agent reports it (less a
	// second: condition times may be kept to the second).
	failing := time.Now()
	env.metrics.SetUnavailable(metricsserver.ExternalMetrics, metric, true)
	t.Cleanup(func() { env.metrics.SetUnavailable(metricsserver.ExternalMetrics, metric, false) })
	waitCondition(t, ns, "web", autoscalingv2.ScalingActive, corev1.ConditionFalse, "FailedGetExternalMetric", "")
	waitReplicas(t, ns, "web", 5, 15*time.Second)
	if held := time.Since(failing); held < 2*syncPeriod {
		t.Errorf("the fallback applied %s after the metric failed, before its failureDuration of %s", held, 3*syncPeriod)
	}
	waitCondition(t, ns, "web", "FallbackActive", corev1.ConditionTrue, "", "")
	waitEvent(t, ns, "web", "Warning FallbackActive ")

	env.metrics.SetUnavailable(metricsserver.ExternalMetrics, metric, false)
	waitReplicas(t, ns, "web", 2, 20*time.Second)
	waitCondition(t, ns, "web", "FallbackActive", corev1.ConditionFalse, "", "")
	waitEvent(t, ns, "web", "Normal FallbackEnded ")
	waitCondition(t, ns, "web", autoscalingv2.ScalingActive, corev1.ConditionTrue, "", "")
}

// A schedule window open all the time (hourly, for two hours) raises the
// queue metric's 2 to its floor of 4, and the status' explanation names
// it.
func TestScheduleFloorThroughAgent(t *testing.T) {
	t.Parallel()
	ns, metric := queueWorkload(t, "ahead-schedule", "web")
	createAutoscaler(t, ns, "web", v1alpha1.AutoscalerSpec{ScaleTargetRef: deploymentRef("web"), MinReplicas: ptr.To[int32](1), MaxReplicas: 10, Metrics: queueMetric(metric),
		Schedules: []v1alpha1.ScheduleWindow{{Name: "always", TimeZone: "Europe/Berlin", Start: "@hourly", Duration: &metav1.Duration{Duration: 2 * time.Hour}, MinReplicas: 4}}})
	startAgent(t, ns, agentConfig{})
	waitReplicas(t, ns, "web", 4, 15*time.Second)
	waitFor(t, 10*time.Second, "an explanation naming the window", func() (bool, string) {
		ex := autoscaler(t, ns, "web").Status.Explanation
		if ex == nil {
			return false, "no explanation"
		}
		for _, s := range ex.Steps {
			if s.Reason == "ScheduleFloor" && s.To == 4 && strings.Contains(s.Message, "always") {
				return true, ""
			}
		}
		return false, statusText(t, ns, "web")
	})
}

// A native HPA opts in with agent.AheadAnnotation: its schedule's floor of
// 4 raises the queue metric's 2. A second HPA whose annotation does not
// parse is not decided: ScalingActive=False/InvalidSpec and a Warning
// Event name the annotation, and its Deployment is left alone.
func TestNativeHPAAheadAnnotation(t *testing.T) {
	t.Parallel()
	ns, metric := queueWorkload(t, "ahead-native", "web", "api")
	annotated := func(name, value string) {
		h := &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{agent.AheadAnnotation: value}},
			Spec:       autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: deploymentRef(name), MinReplicas: ptr.To[int32](1), MaxReplicas: 10, Metrics: queueMetric(metric)},
		}
		if _, err := env.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(t.Context(), h, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	annotated("web", `{"schedules": [{"name": "always", "start": "@hourly", "duration": "2h", "minReplicas": 4}]}`)
	annotated("api", `{"schedules": [{"name": "always", "start": "@hourly", "duration": "2h", "minReplicas": 4, "zone": "UTC"}]}`)
	startAgent(t, ns, agentConfig{serve: agent.ServeHPAs})

	waitReplicas(t, ns, "web", 4, 15*time.Second)
	waitFor(t, 15*time.Second, "the misspelt annotation reported", func() (bool, string) {
		h := getHPA(t, ns, "api")
		c := hpaCondition(h, autoscalingv2.ScalingActive)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == v1alpha1.ReasonInvalidSpec && strings.Contains(c.Message, agent.AheadAnnotation), hpaText(h)
	})
	waitHPAEvent(t, ns, "api", "horizontal-pod-autoscaler Warning InvalidSpec annotation "+agent.AheadAnnotation)
	holdsReplicas(t, ns, "api", 2, 2*syncPeriod)
}
