package fleet

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpointhq/setpoint/internal/kubetest"
	"github.com/setpointhq/setpoint/internal/twin"
)

// windows are the controller-wide settings the agents (and, in the
// differential, kube-controller-manager) run with.
type windows struct {
	sync                 time.Duration
	downscaleStabilizing time.Duration
}

// short are CI's: a 1 s sync period and a 10 s scale-down window, so that
// a trace takes a minute; long are the controller's defaults (15 s, 5 min).
// The window is longer than a pod's start (up to 6 s): a shorter one
// lets the controller's scale-down ignore a pod that is not Ready yet and
// undo the scale-up that made it (as v1.37 does with such a window).
var (
	short = windows{sync: time.Second, downscaleStabilizing: 10 * time.Second}
	dflt  = windows{sync: 15 * time.Second, downscaleStabilizing: 5 * time.Minute}
)

// settings returns the windows this run uses.
func settings() windows {
	if long {
		return dflt
	}
	return short
}

// startTwins starts n Setpoint twins (no HPA controller) named names: the
// first runs the etcd that the others keep their objects in, under
// prefixes of their own. Each has the Autoscaler CRD and the namespace
// the agent's leader Lease lives in.
func startTwins(t *testing.T, names []string) []*twin.Twin {
	t.Helper()
	crd, err := kubetest.AutoscalerCRD()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*twin.Twin, len(names))
	out[0] = twin.StartT(t, twin.Options{Cluster: kubetest.Options{CRDs: [][]byte{crd}, EtcdPrefix: "/" + names[0]}})
	var wg sync.WaitGroup
	for i := 1; i < len(names); i++ {
		wg.Go(func() {
			tw, err := twin.Start(t.Context(), twin.Options{Cluster: kubetest.Options{
				CRDs: [][]byte{crd}, EtcdURL: out[0].Cluster.EtcdURL(), EtcdPrefix: "/" + names[i],
			}})
			if err != nil {
				t.Errorf("twin %s: %v", names[i], err)
				return
			}
			out[i] = tw
		})
	}
	wg.Wait()
	// The twins on the first one's etcd stop before it.
	t.Cleanup(func() {
		for _, tw := range out[1:] {
			if tw != nil {
				if t.Failed() {
					t.Logf("%s", tw.Logs(15))
				}
				tw.Stop()
			}
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	return out
}

// workload is the test's autoscaled Deployment: 200m of CPU requested a
// pod, a target of 50% (100m a pod), 1 to 10 replicas.
const (
	workloadNS   = "shop"
	workloadName = "web"
	cpuRequest   = 200
	targetUtil   = 50
	maxReplicas  = 10
)

// workloadLabels are the Deployment's pod labels.
var workloadLabels = map[string]string{"app": "web"}

// createWorkload creates the namespace and the Deployment with one
// replica in the twin.
func createWorkload(t *testing.T, tw *twin.Twin) {
	t.Helper()
	kube := tw.Cluster.Client()
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workloadNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.AppsV1().Deployments(workloadNS).Create(t.Context(), twin.Deployment(workloadName, workloadLabels, 1, cpuRequest), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createAutoscaler creates the Setpoint Autoscaler of the Deployment.
func createAutoscaler(t *testing.T, tw *twin.Twin) {
	t.Helper()
	if err := tw.CreateAutoscaler(t.Context(), workloadNS, twin.Autoscaler(workloadName, 1, maxReplicas, targetUtil)); err != nil {
		t.Fatal(err)
	}
}

// replicaLog records every change of the Deployment's spec.replicas (the
// scale writes), polled every 200 ms.
type replicaLog struct {
	mu     sync.Mutex
	points []replicaPoint
}

type replicaPoint struct {
	at       time.Time
	replicas int32
}

// follow polls the fleet's Deployment until ctx ends.
func (l *replicaLog) follow(ctx context.Context, tw *twin.Twin) { l.followIn(ctx, tw, workloadNS) }

// snapshot returns the changes so far.
func (l *replicaLog) snapshot() []replicaPoint {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]replicaPoint(nil), l.points...)
}

// values are the replica counts in order.
func values(ps []replicaPoint) []int32 {
	out := make([]int32, len(ps))
	for i, p := range ps {
		out[i] = p.replicas
	}
	return out
}

// reversals counts the changes of direction in vs: up then down is one.
func reversals(vs []int32) int {
	n, dir := 0, 0
	for i := 1; i < len(vs); i++ {
		d := 0
		switch {
		case vs[i] > vs[i-1]:
			d = 1
		case vs[i] < vs[i-1]:
			d = -1
		}
		if d != 0 && dir != 0 && d != dir {
			n++
		}
		if d != 0 {
			dir = d
		}
	}
	return n
}

// hpaCondition returns the condition of type ct, or nil.
func hpaCondition(conds []autoscalingv2.HorizontalPodAutoscalerCondition, ct autoscalingv2.HorizontalPodAutoscalerConditionType) *autoscalingv2.HorizontalPodAutoscalerCondition {
	for i := range conds {
		if conds[i].Type == ct {
			return &conds[i]
		}
	}
	return nil
}

func describe(ps []replicaPoint, start time.Time) string {
	s := ""
	for _, p := range ps {
		s += fmt.Sprintf(" %v:%d", p.at.Sub(start).Round(100*time.Millisecond), p.replicas)
	}
	return s
}
