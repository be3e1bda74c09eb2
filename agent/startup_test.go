package agent

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// startupPod is a pod created at created whose Ready condition turned
// True took later; edit changes it further.
func startupPod(name string, created time.Time, took time.Duration, edit ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"app": "web"}, CreationTimestamp: metav1.NewTime(created)},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(created)},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(created.Add(took))},
		}},
	}
	for _, e := range edit {
		e(p)
	}
	return p
}

// startupPods are n pods created a minute apart from base, the i-th taking
// took(i) to be Ready.
func startupPods(base time.Time, n int, took func(i int) time.Duration) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = startupPod(fmt.Sprintf("web-s%d", i), base.Add(time.Duration(i)*time.Minute), took(i))
	}
	return out
}

func TestMeasureStartup(t *testing.T) {
	base := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
	secs := func(s ...int) func(int) time.Duration {
		return func(i int) time.Duration { return time.Duration(s[i]) * time.Second }
	}
	unready := func(p *corev1.Pod) { p.Status.Conditions[1].Status = corev1.ConditionFalse }
	deleting := func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: base.Add(time.Hour)} }
	restartedApp := func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", RestartCount: 1}}
	}
	restartedSidecar := func(p *corev1.Pod) {
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "proxy", RestartCount: 2,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	}
	initRetried := func(p *corev1.Pod) { // an init container that failed once, then completed: still start-up
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "migrate", RestartCount: 1,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}}
	}
	noTransition := func(p *corev1.Pod) { p.Status.Conditions[1].LastTransitionTime = metav1.Time{} }
	readyBeforeCreated := func(p *corev1.Pod) {
		p.Status.Conditions[1].LastTransitionTime = metav1.NewTime(p.CreationTimestamp.Add(-time.Second))
	}
	with := func(pods []*corev1.Pod, edits ...*corev1.Pod) []*corev1.Pod { return append(pods, edits...) }
	newest := base.Add(time.Hour)

	tests := []struct {
		name string
		pods []*corev1.Pod
		want PodStartup
	}{
		{name: "no pods", want: PodStartup{}},
		{name: "two pods are too few", pods: startupPods(base, 2, secs(30, 40)), want: PodStartup{}},
		{name: "three pods: the 90th percentile is the slowest", pods: startupPods(base, 3, secs(40, 30, 90)),
			want: PodStartup{Time: 90 * time.Second, Pods: 3}},
		{name: "ten pods: the 9th of 10", pods: startupPods(base, 10, func(i int) time.Duration { return time.Duration(10*(10-i)) * time.Second }),
			want: PodStartup{Time: 90 * time.Second, Pods: 10}},
		{name: "one flapping pod among ten does not set it",
			pods: startupPods(base, 10, func(i int) time.Duration {
				if i == 4 {
					return 3 * time.Hour // Ready flapped long after start-up, without a restart
				}
				return 60 * time.Second
			}),
			want: PodStartup{Time: 60 * time.Second, Pods: 10}},
		{name: "only the 20 newest count",
			pods: startupPods(base, 25, func(i int) time.Duration {
				if i < 5 {
					return 10 * time.Minute // last week's image
				}
				return 45 * time.Second
			}),
			want: PodStartup{Time: 45 * time.Second, Pods: 20}},
		{name: "pods that cannot be measured are left out",
			pods: with(startupPods(base, 3, secs(50, 60, 70)),
				startupPod("unready", newest, time.Minute, unready),
				startupPod("deleting", newest, time.Hour, deleting),
				startupPod("restarted", newest, time.Hour, restartedApp),
				startupPod("sidecar-restarted", newest, time.Hour, restartedSidecar),
				startupPod("no-transition", newest, time.Hour, noTransition),
				startupPod("clock-skew", newest, time.Hour, readyBeforeCreated),
				&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "no-conditions", CreationTimestamp: metav1.NewTime(newest)}},
				nil),
			want: PodStartup{Time: 70 * time.Second, Pods: 3}},
		{name: "a retried init container is part of the start-up",
			pods: with(startupPods(base, 2, secs(50, 60)), startupPod("init-retried", newest, 5*time.Minute, initRetried)),
			want: PodStartup{Time: 5 * time.Minute, Pods: 3}},
		{name: "only unready pods", pods: []*corev1.Pod{
			startupPod("a", base, time.Minute, unready), startupPod("b", base, time.Minute, unready), startupPod("c", base, time.Minute, unready)},
			want: PodStartup{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, measureStartup(tt.pods)); diff != "" {
				t.Errorf("measureStartup (-want +got):\n%s", diff)
			}
		})
	}
}

// The measurement is order-independent: the same pods in another order
// measure the same.
func TestMeasureStartupOrder(t *testing.T) {
	base := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
	pods := startupPods(base, 30, func(i int) time.Duration { return time.Duration(30+(i*37)%50) * time.Second })
	// Pods created in the same second, differing only in their times.
	pods = append(pods, startupPod("tie-a", base.Add(29*time.Minute), 20*time.Second), startupPod("tie-b", base.Add(29*time.Minute), 200*time.Second))
	want := measureStartup(pods)
	for k := 1; k < len(pods); k += 7 {
		rotated := append(append([]*corev1.Pod{}, pods[k:]...), pods[:k]...)
		if got := measureStartup(rotated); got != want {
			t.Errorf("rotated by %d: %+v, want %+v", k, got, want)
		}
	}
}

// A reconcile measures the start-up of the target's pods, and only of
// them, into the request.
func TestReconcileMeasuresStartup(t *testing.T) {
	h := newHarness(t, testAutoscaler(), scaleUp())
	base := now.Add(-time.Hour)
	for _, p := range append(startupPods(base, 3, func(i int) time.Duration { return time.Duration(40+10*i) * time.Second }),
		startupPod("db-2", base, time.Hour, func(p *corev1.Pod) { p.Labels = map[string]string{"app": "db"} })) {
		if err := h.c.podIndex.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.c.reconcile(context.Background(), "ns/web"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	// web-1 of the harness has no Ready condition; db-2 is another
	// target's.
	if got, want := h.svc.requests[0].PodStartup, (PodStartup{Time: 60 * time.Second, Pods: 3}); got != want {
		t.Errorf("PodStartup = %+v, want %+v", got, want)
	}
}
