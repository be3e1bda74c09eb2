package main

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	scalefake "k8s.io/client-go/scale/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/setpointhq/setpoint/agent"
	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	"github.com/setpointhq/setpoint/internal/testkit"
)

// service is an agent.Service that fails every call and counts the
// Recommend calls.
type service struct {
	mu        sync.Mutex
	recommend int
}

func (s *service) Recommend(context.Context, *agent.Request) (*agent.Recommendation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recommend++
	return nil, errors.New("not served in this test")
}

func (s *service) Observe(context.Context, *agent.Observation) error { return nil }

func (s *service) DeleteTarget(context.Context, agent.Target) error { return nil }

// One leader term of runController: its informers start after the
// controller added its handlers (started earlier, New would refuse them),
// its caches sync and feed reconciles, and when the term's context ends
// it returns with every informer and worker stopped.
func TestRunControllerTerm(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 5,
		},
	}
	kube := kubefake.NewClientset(hpa)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{v1alpha1.AutoscalerResource: "AutoscalerList"})
	svc := &service{}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "apps", Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	scales := &scalefake.FakeScaleClient{}
	scales.AddReactor("get", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &autoscalingv1.Scale{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
			Spec:       autoscalingv1.ScaleSpec{Replicas: 1},
			Status:     autoscalingv1.ScaleStatus{Replicas: 1, Selector: "app=web"},
		}, nil
	})
	opts := agent.Options{
		Kube: kube, Dynamic: dyn, Scales: scales, Mapper: mapper,
		Service: svc, Serve: agent.ServeBoth, Cluster: "c", Workers: 1, SyncPeriod: time.Minute,
	}
	var current atomic.Pointer[agent.Controller]
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- runController(ctx, "ns", opts, &current) }()

	testkit.Eventually(t, 10*time.Second, "the term's caches synced and the HPA reconciled", func() error {
		if c := current.Load(); c == nil || !c.Synced() {
			return errors.New("caches not synced")
		}
		svc.mu.Lock()
		defer svc.mu.Unlock()
		if svc.recommend == 0 {
			return errors.New("no Recommend call")
		}
		return nil
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("runController: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("runController did not return within 10s of the term's end")
	}
	if current.Load().Synced() {
		t.Error("the controller still reports synced after its term")
	}
}
