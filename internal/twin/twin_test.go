package twin

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/setpointhq/setpoint/internal/kubetest/metricsserver"
	"github.com/setpointhq/setpoint/internal/testkit"
)

func TestTraceAt(t *testing.T) {
	tr := Trace{Points: []Point{{0, 100}, {10 * time.Second, 200}, {20 * time.Second, 200}}}
	for _, c := range []struct {
		at   time.Duration
		want float64
	}{{-time.Second, 100}, {0, 100}, {5 * time.Second, 150}, {10 * time.Second, 200}, {time.Hour, 200}} {
		if got := tr.At(c.at); got != c.want {
			t.Errorf("At(%v) = %v, want %v", c.at, got, c.want)
		}
	}
	if got := tr.Scaled(2).At(10 * time.Second); got != 150 {
		t.Errorf("Scaled(2).At(10s) = %v, want 150", got)
	}
}

func TestTraceShapes(t *testing.T) {
	for _, tr := range []Trace{
		Steady(500, time.Minute), Ramp(100, 900, 10*time.Second, 20*time.Second),
		Spike(100, 900, 10*time.Second, 15*time.Second, 20*time.Second),
		Diurnal(100, 900, time.Minute), Flapping(200, 800, 20*time.Second, 3),
	} {
		t.Run(tr.Name, func(t *testing.T) {
			lo, hi := math.Inf(1), math.Inf(-1)
			for i, p := range tr.Points {
				if i > 0 && p.At <= tr.Points[i-1].At {
					t.Fatalf("points out of order at %d: %v", i, tr.Points)
				}
				lo, hi = min(lo, p.Demand), max(hi, p.Demand)
			}
			if tr.Name != "steady" && (lo != 100 && lo != 200 || hi != 900 && hi != 800) {
				t.Errorf("demand spans [%v, %v]", lo, hi)
			}
			if first, last := tr.At(0), tr.At(tr.Duration()+time.Hour); first != last {
				t.Errorf("ends at %v, starts at %v: every trace comes back down", last, first)
			}
		})
	}
}

// TestStages checks the kwok configuration is four well-formed Stage
// documents with the delays asked for.
func TestStages(t *testing.T) {
	docs := strings.Split(string(stages(PodTiming{Start: time.Second, StartJitter: 500 * time.Millisecond, Ready: 2 * time.Second, ReadyJitter: time.Second, Terminate: 3 * time.Second})), "\n---\n")
	type stage struct {
		Kind     string
		Metadata struct{ Name string }
		Spec     struct {
			Delay struct {
				DurationMilliseconds       int64
				JitterDurationMilliseconds int64
			}
		}
	}
	var got []string
	for _, d := range docs {
		var s stage
		if err := yaml.Unmarshal([]byte(d), &s); err != nil {
			t.Fatalf("%v in\n%s", err, d)
		}
		got = append(got, fmt.Sprintf("%s %s %d %d", s.Kind, s.Metadata.Name, s.Spec.Delay.DurationMilliseconds, s.Spec.Delay.JitterDurationMilliseconds))
	}
	want := []string{"Stage node-ready 0 0", "Stage pod-start 1000 1500", "Stage pod-ready 2000 3000", "Stage pod-terminate 3000 0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stages (-want +got):\n%s", diff)
	}
}

// TestLoadTick checks the load model against pods written by hand: the
// demand is shared by the Ready pods, starting pods burn their burst,
// pods not running have no metrics, and gone pods lose theirs.
func TestLoadTick(t *testing.T) {
	ms := metricsserver.StartT(t, metricsserver.Options{})
	start := time.Now()
	labels := map[string]string{"app": "web"}
	pod := func(name string, phase corev1.PodPhase, ready bool, started time.Time) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels}, Status: corev1.PodStatus{Phase: phase}}
		p.Spec.Containers = []corev1.Container{{Name: "app"}}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		if phase == corev1.PodRunning {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}}
		}
		return p
	}
	l := newLoad(Workload{Namespace: "ns", Selector: labels, Trace: Steady(900, time.Minute), Burst: 300, BurstFor: 10 * time.Second, Idle: 5, PodsMetric: "work", ExternalMetric: "queue"},
		ms, start)
	other := pod("other", corev1.PodRunning, true, start.Add(-time.Hour))
	other.Labels = map[string]string{"app": "db"}
	pods := []*corev1.Pod{
		pod("old-a", corev1.PodRunning, true, start.Add(-time.Hour)),
		pod("old-b", corev1.PodRunning, true, start.Add(-time.Hour)),
		pod("fresh", corev1.PodRunning, true, start.Add(-time.Second)),
		pod("warming", corev1.PodRunning, false, start.Add(-time.Second)),
		pod("idle", corev1.PodRunning, false, start.Add(-time.Hour)),
		pod("pending", corev1.PodPending, false, time.Time{}),
		other,
	}
	l.tick(start.Add(time.Second), pods)
	cpu := func() map[string]int64 {
		got := map[string]int64{}
		for name := range l.served {
			got[name] = -1
		}
		for _, p := range pods {
			if u, ok := podCPU(t, ms, p.Name); ok {
				got[p.Name] = u
			}
		}
		return got
	}
	want := map[string]int64{"old-a": 300, "old-b": 300, "fresh": 600, "warming": 305, "idle": 5}
	if diff := cmp.Diff(want, cpu()); diff != "" {
		t.Errorf("CPU (millicores) after the first tick (-want +got):\n%s", diff)
	}
	if s := l.Last(); s.Running != 5 || s.Ready != 3 || s.PerReadyPod != 300 || s.Demand != 900 {
		t.Errorf("sample %+v, want 5 running, 3 Ready, 300 per Ready pod of 900", s)
	}
	// Two pods go away; the others share the demand.
	pods = pods[2:]
	l.tick(start.Add(2*time.Second), pods)
	want = map[string]int64{"fresh": 1200, "warming": 305, "idle": 5}
	if diff := cmp.Diff(want, cpu()); diff != "" {
		t.Errorf("CPU after two pods went (-want +got):\n%s", diff)
	}
	// The demand moves: a new trace applies from the next tick on, and
	// the samples keep counting from the load's start.
	l.SetTrace(Steady(600, time.Minute))
	l.tick(start.Add(3*time.Second), pods)
	want = map[string]int64{"fresh": 900, "warming": 305, "idle": 5}
	if diff := cmp.Diff(want, cpu()); diff != "" {
		t.Errorf("CPU after SetTrace (-want +got):\n%s", diff)
	}
	if s := l.Last(); s.Demand != 600 || s.At != 3*time.Second {
		t.Errorf("sample after SetTrace %+v, want 600 at 3s", s)
	}
	l.stop()
	if diff := cmp.Diff(map[string]int64{}, cpu()); diff != "" {
		t.Errorf("CPU after stop (-want +got):\n%s", diff)
	}
}

// podCPU reads a pod's served CPU through the metrics server's HTTP API.
func podCPU(t *testing.T, ms *metricsserver.Server, name string) (int64, bool) {
	t.Helper()
	pm, ok := ms.PodMetrics("ns", name)
	if !ok {
		return 0, false
	}
	return pm.Containers[0].Usage.Cpu().MilliValue(), true
}

// TestClosedLoop runs a reference twin: kube-controller-manager's own HPA
// controller scales a Deployment whose pods the scheduler places and kwok
// starts, under a load that rises and falls. The loop closes: the scale
// writes become Ready pods, the CPU per pod falls back under the target,
// and the workload comes back down when the load does.
func TestClosedLoop(t *testing.T) {
	RequireBinaries(t)
	ctx := t.Context()
	started := time.Now()
	tw := StartT(t, Options{Reference: true, ControllerFlags: []string{
		"--horizontal-pod-autoscaler-sync-period=1s",
		"--horizontal-pod-autoscaler-downscale-stabilization=5s",
	}})
	t.Logf("twin started in %v", time.Since(started).Round(time.Millisecond))
	kube := tw.Cluster.Client()
	ns := "loop"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "web"}
	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, Deployment("web", labels, 1, 200), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// 50% of 200m is 100m a pod: 150m of demand needs 2 pods, 700m 7.
	hpa := CPUHPA("web", 1, 10, 50)
	if _, err := kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	load := tw.AddWorkload(Workload{Namespace: ns, Selector: labels, Noise: 0.03,
		Trace: Trace{Name: "up and down", Points: []Point{{0, 150}, {10 * time.Second, 150}, {10*time.Second + time.Millisecond, 700}, {45 * time.Second, 700}, {45*time.Second + time.Millisecond, 150}}}})

	// Up: Ready pods answer the load, and the CPU per pod falls under
	// the target's 10% tolerance.
	var peak Sample
	err := testkit.Poll(ctx, 60*time.Second, func() error {
		s := load.Last()
		if s.Demand > 150 && s.PerReadyPod > peak.PerReadyPod {
			peak = s
		}
		if s.Demand != 700 || s.Ready < 7 || s.PerReadyPod > 110 {
			return fmt.Errorf("sample %+v", s)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("no scale-up to 7 Ready pods at the target: %v", err)
	}
	if peak.PerReadyPod < 200 {
		t.Errorf("peak CPU per Ready pod %.0fm: the load never pressed the pods before they scaled", peak.PerReadyPod)
	}
	// Down: pods terminate and are gone, the survivors carry the load.
	err = testkit.Poll(ctx, 60*time.Second, func() error {
		s := load.Last()
		pods := tw.Pods(ns, labels)
		if s.Demand != 150 || s.Ready > 2 || len(pods) > 2 {
			return fmt.Errorf("sample %+v, %d pods", s, len(pods))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("no scale-down once the load fell: %v", err)
	}
	h, err := kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("HPA status %+v; %d samples", h.Status, len(load.Samples()))
	for _, s := range load.Samples() {
		if s.Ready > 0 && s.Running > 10 {
			t.Errorf("more pods running than the HPA's maximum: %+v", s)
		}
	}
}

// TestManifestFlags rewrites deploy-ha's server and agent flags as the
// fleet runs them: the loopback values replace the deployed ones, every
// other flag is kept, and a flag the manifest lacks is an error.
func TestManifestFlags(t *testing.T) {
	args, err := ManifestArgs("../../"+ServerManifest, "server")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Rewrite(args, map[string]string{"-listen": "127.0.0.1:1", "-etcd-endpoints": "http://127.0.0.1:2"}, "-etcd-cert", "-etcd-key", "-etcd-ca")
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(got, " ")
	for _, want := range []string{"-listen=127.0.0.1:1", "-etcd-endpoints=http://127.0.0.1:2", "-store=etcd", "-etcd-prefix=/setpoint/", "-tls-client-ca="} {
		if !strings.Contains(joined, want) {
			t.Errorf("rewritten server flags %q lack %q", joined, want)
		}
	}
	if strings.Contains(joined, "-etcd-cert") || len(got) != len(args)-3 {
		t.Errorf("rewritten server flags %q: want the manifest's %d less the 3 dropped", joined, len(args))
	}
	if _, err := Rewrite(args, map[string]string{"-no-such-flag": "x"}); err == nil {
		t.Error("Rewrite accepted a flag the manifest lacks")
	}
	if _, err := Rewrite(args, nil, "-no-such-flag"); err == nil {
		t.Error("Rewrite dropped a flag the manifest lacks without an error")
	}
	agent, err := ManifestArgs("../../"+AgentManifest, "agent")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(agent, "-serve=autoscalers") {
		t.Errorf("agent flags %q: want -serve=autoscalers as deployed", agent)
	}
}
