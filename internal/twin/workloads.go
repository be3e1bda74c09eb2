package twin

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
)

// Deployment returns a Deployment of replicas pods labelled labels, each
// requesting cpuMilli millicores.
func Deployment(name string, labels map[string]string, replicas int32, cpuMilli int64) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "registry.invalid/app:1",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(cpuMilli, resource.DecimalSI)}},
				}}},
			},
		},
	}
}

// CPUHPA returns an HPA of the Deployment name on CPU utilization.
func CPUHPA(name string, minReplicas, maxReplicas, utilization int32) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			MinReplicas:    ptr.To(minReplicas), MaxReplicas: maxReplicas,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(utilization)},
			}}},
		},
	}
}

// Autoscaler returns a Setpoint Autoscaler with the spec of CPUHPA: the
// Deployment name on CPU utilization.
func Autoscaler(name string, minReplicas, maxReplicas, utilization int32) *v1alpha1.Autoscaler {
	hpa := CPUHPA(name, minReplicas, maxReplicas, utilization)
	return &v1alpha1.Autoscaler{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.AutoscalerSpec{
		ScaleTargetRef: hpa.Spec.ScaleTargetRef, MinReplicas: hpa.Spec.MinReplicas, MaxReplicas: maxReplicas, Metrics: hpa.Spec.Metrics,
	}}
}

// CreateAutoscaler creates a in namespace ns of the twin.
func (tw *Twin) CreateAutoscaler(ctx context.Context, ns string, a *v1alpha1.Autoscaler) error {
	a = a.DeepCopy()
	a.Namespace = ns
	u, err := v1alpha1.ToUnstructured(a)
	if err != nil {
		return err
	}
	if _, err := tw.Cluster.Dynamic().Resource(v1alpha1.AutoscalerResource).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("twin: create Autoscaler %s/%s: %w", ns, a.Name, err)
	}
	return nil
}

// CreateNamespace creates namespace ns in the twin; one that exists is
// left as it is.
func (tw *Twin) CreateNamespace(ctx context.Context, ns string) error {
	_, err := tw.Cluster.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("twin: create namespace %s: %w", ns, err)
	}
	return nil
}
