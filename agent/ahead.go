package agent

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// setAhead copies an Autoscaler's fallback and schedules into the API's
// spec (docs/ahead-of-load.md); the service validates them, naming the
// field. A spec without them leaves out untouched.
func setAhead(out *setpointv1.HorizontalPodAutoscalerSpec, spec *v1alpha1.AutoscalerSpec) {
	if f := spec.Fallback; f != nil {
		out.Fallback = &setpointv1.Fallback{FailureDuration: durationOf(f.FailureDuration), Behavior: f.Behavior, Replicas: f.Replicas}
	}
	if len(spec.Schedules) == 0 {
		return
	}
	out.Schedules = make([]*setpointv1.ScheduleWindow, len(spec.Schedules))
	for i, w := range spec.Schedules {
		out.Schedules[i] = &setpointv1.ScheduleWindow{
			Name: w.Name, TimeZone: w.TimeZone, Start: w.Start, End: w.End,
			Duration: durationOf(w.Duration), MinReplicas: w.MinReplicas,
		}
	}
}

// durationOf is d as a protobuf duration, nil when unset.
func durationOf(d *metav1.Duration) *durationpb.Duration {
	if d == nil {
		return nil
	}
	return durationpb.New(d.Duration)
}
