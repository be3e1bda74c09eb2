package engine

import (
	"errors"
	"time"
)

// ErrInvalidInput is matched (errors.Is) by every error Decide returns for
// input it cannot decide on.
var ErrInvalidInput = errors.New("engine: invalid input")

// FieldError says which input field is invalid and why.
type FieldError struct {
	// Field is the path of the offending field, e.g. "spec.metrics[1].target.milli".
	Field string
	// Reason says what is wrong with it.
	Reason string
}

// Error implements error.
func (e *FieldError) Error() string { return "engine: invalid " + e.Field + ": " + e.Reason }

// Is makes every FieldError match ErrInvalidInput.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidInput }

// Decide makes one decision for a target: the replica count the Kubernetes
// HPA controller would choose for in, given the target's history h. It is
// pure: equal arguments give equal results; it reads no clock and does no
// I/O. It returns a *FieldError for invalid input. h is not modified; the
// decision's history shares h's scale events (see Decision.History).
func Decide(in Input, h History) (Decision, error) {
	v := validator{}
	v.input(&in)
	if v.err != nil {
		return Decision{}, v.err
	}
	return decide(in, h, v.pods), nil
}

// RecordScale returns h with a rescale from → to applied at `at` recorded
// as a scale event, as the Kubernetes controller records it after a
// successful update: only when the spec has a behavior (b non-nil), in the
// direction of the change, overwriting an event older than that
// direction's longest policy period. h is not modified.
func RecordScale(h History, b *Behavior, from, to int32, at time.Time) History {
	return recordScale(h, b, from, to, at)
}

// RescaleFailed returns the status to keep when the rescale decided in d
// could not be applied: d.Status with AbleToScale=False/FailedUpdateScale,
// the desired replicas and last scale time of prev (the status the
// decision started from) and prev's ScaledToZero condition. message is the
// update error.
func RescaleFailed(prev Status, d Decision, at time.Time, message string) Status {
	return rescaleFailed(prev, d, at, message)
}
