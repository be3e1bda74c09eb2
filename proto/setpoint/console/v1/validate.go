package consolev1

import (
	"errors"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// Validate checks the target, the range and that a spec is given; the
// spec itself is checked as Simulate checks it.
func (r *ReplayRequest) Validate() error {
	e := &setpointv1.ValidationError{}
	// The target and the range are a ListDecisions request's, with the
	// same field names.
	probe := &setpointv1.ListDecisionsRequest{Target: r.GetTarget(), StartTime: r.GetStartTime(), EndTime: r.GetEndTime()}
	var ve *setpointv1.ValidationError
	if err := probe.Validate(); errors.As(err, &ve) {
		e.Violations = append(e.Violations, ve.Violations...)
	}
	if r.GetSpec() == nil {
		e.Add("spec", "must be set")
	}
	return e.Err()
}
