package agent

import (
	"encoding/json"
	"fmt"
	"strings"

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
	if f := spec.Forecast; f != nil {
		out.Forecast = &setpointv1.Forecast{LeadTime: durationOf(f.LeadTime), MaxError: float64(f.MaxErrorPercent) / 100}
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

// AheadAnnotation turns on a fallback, schedule windows and a forecast for
// a native HorizontalPodAutoscaler the agent serves. Its value is JSON
// with the Autoscaler's schema for them:
//
//	{"fallback": {"failureDuration": "45s", "behavior": "static", "replicas": 5},
//	 "schedules": [{"name": "business-hours", "timeZone": "Europe/Berlin",
//	                "start": "0 8 * * 1-5", "end": "0 18 * * 1-5", "minReplicas": 10}],
//	 "forecast": {"leadTime": "5m", "maxErrorPercent": 15}}
//
// It is off by default: an HPA without it is decided exactly as the HPA
// controller decides. A value that does not parse is reported as an
// invalid spec (ScalingActive=False/InvalidSpec and a Warning Event), and
// nothing is decided until it is fixed.
const AheadAnnotation = "setpoint.dev/ahead-of-load"

// aheadFields are the fields AheadAnnotation may set.
type aheadFields struct {
	Fallback  *v1alpha1.Fallback        `json:"fallback,omitempty"`
	Schedules []v1alpha1.ScheduleWindow `json:"schedules,omitempty"`
	Forecast  *v1alpha1.Forecast        `json:"forecast,omitempty"`
}

// maxAheadAnnotation bounds AheadAnnotation's value, in bytes (32 windows
// of 128-byte fields fit).
const maxAheadAnnotation = 32 << 10

// setAheadAnnotation sets spec's fallback, schedules and forecast from an HPA's
// AheadAnnotation, when it has one. Unknown fields are an error, so a
// misspelt field is not silently ignored.
func setAheadAnnotation(spec *v1alpha1.AutoscalerSpec, annotations map[string]string) error {
	v, ok := annotations[AheadAnnotation]
	if !ok {
		return nil
	}
	if len(v) > maxAheadAnnotation {
		return fmt.Errorf("annotation %s: at most %d bytes, got %d", AheadAnnotation, maxAheadAnnotation, len(v))
	}
	var f aheadFields
	dec := json.NewDecoder(strings.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return fmt.Errorf("annotation %s: %v", AheadAnnotation, err)
	}
	if dec.More() {
		return fmt.Errorf("annotation %s: one JSON object expected", AheadAnnotation)
	}
	spec.Fallback, spec.Schedules, spec.Forecast = f.Fallback, f.Schedules, f.Forecast
	return nil
}
