package agent

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// Event sources: the component named in the Events the agent records.
const (
	// HPAEventComponent is the source of the Events about
	// HorizontalPodAutoscalers: the HPA controller's own
	// ("horizontal-pod-autoscaler", as kube-controller-manager records
	// them), so `kubectl describe hpa` reads the same whichever serves it.
	HPAEventComponent = "horizontal-pod-autoscaler"
	// AutoscalerEventComponent is the source of the Events about
	// Autoscalers.
	AutoscalerEventComponent = "setpoint-agent"
)

// EventRecorders are the recorders of Options.Events and
// Options.HPAEvents, sharing one broadcaster.
type EventRecorders struct {
	// Autoscalers records Events about Autoscalers.
	Autoscalers record.EventRecorder
	// HPAs records Events about HorizontalPodAutoscalers.
	HPAs record.EventRecorder
	// Stop stops recording; Events not yet written are dropped.
	Stop func()
}

// StartEventRecorders records Events through the core/v1 Events API as
// the HPA controller of kube-controller-manager does: client-go's
// record.EventBroadcaster with its defaults, whose correlator writes the
// eleventh and later similar Events about an object within ten minutes as
// one "(combined from similar events): …" Event and counts repeats. It
// runs until ctx ends or Stop is called.
func StartEventRecorders(ctx context.Context, kube kubernetes.Interface) EventRecorders {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	return EventRecorders{
		Autoscalers: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: AutoscalerEventComponent}),
		HPAs:        b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: HPAEventComponent}),
		Stop:        b.Shutdown,
	}
}
