package admission

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	consolev1 "github.com/setpointhq/setpoint/proto/setpoint/console/v1"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/auth"
	"github.com/setpointhq/setpoint/server/budget"
	"golang.org/x/time/rate"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// rateLimiter is a token bucket per name: a principal, or the address of
// callers without one. A bucket is made on a name's first call; at most
// maxBuckets are kept.
type rateLimiter struct {
	limit rate.Limit
	burst int
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

func newRateLimiter(perSecond float64, burst int, now func() time.Time) *rateLimiter {
	return &rateLimiter{limit: rate.Limit(perSecond), burst: burst, now: now, buckets: map[string]*rate.Limiter{}}
}

// take takes a token of name's bucket; when none is left it returns false
// and how long until one will be.
func (l *rateLimiter) take(name string) (time.Duration, bool) {
	l.mu.Lock()
	b, ok := l.buckets[name]
	if !ok {
		if len(l.buckets) >= maxBuckets {
			clear(l.buckets)
		}
		b = rate.NewLimiter(l.limit, l.burst)
		l.buckets[name] = b
	}
	l.mu.Unlock()
	now := l.now()
	r := b.ReserveN(now, 1)
	if !r.OK() {
		return time.Second, false
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, false
	}
	return 0, true
}

// allow takes a token of name's bucket, and reports whether there was one.
func (l *rateLimiter) allow(name string) bool {
	_, ok := l.take(name)
	return ok
}

// check admits a call of ctx's principal, or answers ResourceExhausted
// with a google.rpc.RetryInfo saying when to retry. Calls without a
// principal (a server without authentication) are not limited here (see
// peerLimiter). The caller counts the refusal (admission.tap).
func (l *rateLimiter) check(ctx context.Context) error {
	p, ok := auth.PrincipalFrom(ctx)
	if !ok {
		return nil
	}
	wait, ok := l.take(p.Name)
	if ok {
		return nil
	}
	st := status.New(codes.ResourceExhausted, "rate limit exceeded; retry later")
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)}); err == nil {
		st = d
	}
	return st.Err()
}

// RequestLimits bound the lists of one request, and its sizes (package budget).
type RequestLimits struct {
	// MaxPods bounds a request's pods, pod metrics and per-pod values.
	MaxPods int
	// MaxMetrics bounds a request's metrics, observations and metric values.
	MaxMetrics int
	// Budgets are the size budgets of every string, list and map.
	Budgets budget.Budgets
}

// Check returns InvalidArgument with a google.rpc.BadRequest naming every
// list of req longer than its limit: pods, pod metrics and per-pod metric
// values by MaxPods; spec metrics (a Simulate step's edited spec too),
// observations and metric values by MaxMetrics.
func (l RequestLimits) Check(req any) error { return l.checkReceived(req, 0) }

// checkReceived is check for a request received as received bytes (0:
// unknown; see budget.Budgets.CheckReceived).
func (l RequestLimits) checkReceived(req any, received int64) error {
	var vs []setpointv1.FieldViolation
	bound := func(field string, n, max int, what string) {
		if n > max {
			vs = append(vs, setpointv1.FieldViolation{Field: field, Description: fmt.Sprintf("%d %s: at most %d per request", n, what, max)})
		}
	}
	step := func(prefix string, pods []*setpointv1.Pod, rm *setpointv1.ResourceMetrics, obs []*setpointv1.MetricObservation) {
		bound(prefix+"pods", len(pods), l.MaxPods, "pods")
		bound(prefix+"resource_metrics.items", len(rm.GetItems()), l.MaxPods, "pod metrics")
		bound(prefix+"observations", len(obs), l.MaxMetrics, "metrics")
		for i, o := range obs {
			if n := len(o.GetValues()); n > l.MaxPods { // the path is formatted only for a violation
				bound(fmt.Sprintf("%sobservations[%d].values", prefix, i), n, l.MaxPods, "pod values")
			}
		}
	}
	switch r := req.(type) {
	case *setpointv1.RecommendRequest:
		bound("spec.metrics", len(r.GetSpec().GetMetrics()), l.MaxMetrics, "metrics")
		step("", r.GetPods(), r.GetResourceMetrics(), r.GetObservations())
	case *consolev1.ReplayRequest:
		bound("spec.metrics", len(r.GetSpec().GetMetrics()), l.MaxMetrics, "metrics")
	case *setpointv1.PutFleetRequest:
		bound("spec.autoscaler.metrics", len(r.GetSpec().GetAutoscaler().GetMetrics()), l.MaxMetrics, "metrics")
	case *setpointv1.ReportRequest:
		rep := r.GetReport()
		step("report.", rep.GetPods(), rep.GetResourceMetrics(), rep.GetObservations())
	case *setpointv1.SimulateFleetRequest:
		bound("spec.autoscaler.metrics", len(r.GetSpec().GetAutoscaler().GetMetrics()), l.MaxMetrics, "metrics")
		for i, s := range r.GetSteps() {
			for j, rep := range s.GetReports() {
				step(fmt.Sprintf("steps[%d].reports[%d].", i, j), rep.GetPods(), rep.GetResourceMetrics(), rep.GetObservations())
			}
			bound(fmt.Sprintf("steps[%d].spec.autoscaler.metrics", i), len(s.GetSpec().GetAutoscaler().GetMetrics()), l.MaxMetrics, "metrics")
		}
	case *setpointv1.SimulateRequest:
		bound("spec.metrics", len(r.GetSpec().GetMetrics()), l.MaxMetrics, "metrics")
		for i, s := range r.GetSteps() {
			prefix := fmt.Sprintf("steps[%d].", i)
			step(prefix, s.GetPods(), s.GetResourceMetrics(), s.GetObservations())
			bound(prefix+"metric_values", len(s.GetMetricValues()), l.MaxMetrics, "metric values")
			bound(prefix+"spec.metrics", len(s.GetSpec().GetMetrics()), l.MaxMetrics, "metrics")
		}
	}
	if m, ok := req.(proto.Message); ok {
		e := &setpointv1.ValidationError{}
		l.Budgets.CheckReceived(e, m, received)
		vs = append(vs, e.Violations...)
	}
	if len(vs) == 0 {
		return nil
	}
	return BadRequest(vs)
}

// unary is the unary request-limits interceptor.
func (l RequestLimits) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	received, _ := requestBytes(ctx)
	if err := l.checkReceived(req, received); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// stream is the stream request-limits interceptor.
func (l RequestLimits) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &checkedStream{ServerStream: ss, check: l.Check})
}

// BadRequest is InvalidArgument with a google.rpc.BadRequest detail listing
// the violations.
func BadRequest(vs []setpointv1.FieldViolation) error {
	br := &errdetails.BadRequest{}
	msg := make([]string, 0, len(vs))
	for _, v := range vs {
		br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{Field: v.Field, Description: v.Description})
		msg = append(msg, v.Field+": "+v.Description)
	}
	st := status.New(codes.InvalidArgument, "invalid request: "+strings.Join(msg, "; "))
	if withDetails, err := st.WithDetails(br); err == nil {
		st = withDetails
	}
	return st.Err()
}
