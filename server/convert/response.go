package convert

import (
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Response is reusable memory for the messages of Recommend's responses
// (RecommendResponse): a server answering many calls fills the same
// decision, explanation and status messages instead of making new ones
// for each response. The zero value is ready to use. A Response holds
// one response at a time: the response is valid until Reset, which may
// come only once nothing uses it any more (for a gRPC server: once the
// response is sent, at the call's end). Strings are not part of it: a
// response's strings stay valid.
type Response struct {
	fresh bool // make everything new (Decision and its kin)

	singles [1]struct {
		response     setpointv1.RecommendResponse
		decision     setpointv1.Decision
		decisionTime timestamppb.Timestamp
		explanation  setpointv1.Explanation
		status       setpointv1.HorizontalPodAutoscalerStatus
		lastScale    timestamppb.Timestamp
	}
	metricExplanations    []setpointv1.MetricExplanation
	metricExplanationList []*setpointv1.MetricExplanation
	steps                 []setpointv1.Step
	stepList              []*setpointv1.Step
	metricStatuses        []setpointv1.MetricStatus
	metricValues          []setpointv1.MetricValueStatus
	metricStatusList      []*setpointv1.MetricStatus
	resourceStatuses      []setpointv1.ResourceMetricStatus
	conditions            []setpointv1.Condition
	conditionTimes        []timestamppb.Timestamp
	conditionList         []*setpointv1.Condition
}

// fresh is the memory of the conversions that make everything new
// (Decision, Status, Explanation): shared, and never written.
var fresh = &Response{fresh: true}

// Reset forgets the response r holds: its messages are cleared, so that
// they keep no string alive, and arrays larger than maxScratchEntries are
// let go.
func (r *Response) Reset() {
	clear(r.singles[:])
	resetScratch(&r.metricExplanations)
	resetScratch(&r.metricExplanationList)
	resetScratch(&r.steps)
	resetScratch(&r.stepList)
	resetScratch(&r.metricStatuses)
	resetScratch(&r.metricValues)
	resetScratch(&r.metricStatusList)
	resetScratch(&r.resourceStatuses)
	resetScratch(&r.conditions)
	resetScratch(&r.conditionTimes)
	resetScratch(&r.conditionList)
}

// single returns *p, a message of r's memory, or a new message when r is
// fresh.
func single[T any](r *Response, p *T) *T {
	if r.fresh {
		return new(T)
	}
	return p
}

// grab returns n zeroed entries after those taken from *buf since the
// last Reset (new ones when r is fresh), as a slice of capacity n.
func grab[T any](r *Response, buf *[]T, n int) []T {
	if r.fresh {
		return make([]T, n)
	}
	if len(*buf)+n > cap(*buf) {
		// A new array: the entries taken before stay in the old one,
		// which the response refers to until Reset.
		*buf = make([]T, 0, max(2*cap(*buf), n))
	}
	l := len(*buf)
	*buf = (*buf)[:l+n]
	return (*buf)[l : l+n : l+n]
}
