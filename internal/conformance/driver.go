package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/internal/scenario"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// grpcDriver replays one scenario through a Setpoint server: Recommend for
// each step (the request an agent would send), Observe when the controller
// scaled.
type grpcDriver struct {
	client   setpointv1.AutoscalerServiceClient
	clock    *Clock
	key      *setpointv1.TargetKey
	decision string // id of the last decision
}

// Decide implements scenario.Driver.
func (d *grpcDriver) Decide(ctx context.Context, req *setpointv1.RecommendRequest, now time.Time) (scenario.Outcome, error) {
	d.clock.Set(now)
	req.Target = d.key
	resp, err := d.client.Recommend(ctx, req)
	if err != nil {
		return scenario.Outcome{}, fmt.Errorf("recommend: %w", err)
	}
	dec := resp.GetDecision()
	d.decision = dec.GetDecisionId()
	return outcome(dec)
}

// Applied implements scenario.Driver.
func (d *grpcDriver) Applied(ctx context.Context, from, to int32, at time.Time) error {
	d.clock.Set(at)
	_, err := d.client.Observe(ctx, &setpointv1.ObserveRequest{
		Target:     d.key,
		DecisionId: d.decision,
		Change:     &setpointv1.ObserveRequest_Applied{Applied: &setpointv1.AppliedChange{From: from, To: to}},
	})
	if err != nil {
		return fmt.Errorf("observe: %w", err)
	}
	return nil
}

// outcome reads a decision of the API as a scenario outcome.
func outcome(dec *setpointv1.Decision) (scenario.Outcome, error) {
	st := dec.GetStatus()
	o := scenario.Outcome{
		OK:              dec.GetError() == "",
		DesiredReplicas: st.GetDesiredReplicas(),
		CurrentReplicas: st.GetCurrentReplicas(),
	}
	if dec.GetRescale() {
		n := dec.GetDesiredReplicas()
		o.Scale = &n
	}
	for _, c := range st.GetConditions() {
		o.Conditions = append(o.Conditions, engine.Condition{
			Type: engine.ConditionType(c.GetType()), Status: engine.ConditionStatus(c.GetStatus()), Reason: c.GetReason(), Message: c.GetMessage(),
		})
	}
	for i, m := range st.GetCurrentMetrics() {
		ms, err := metricStatus(m)
		if err != nil {
			return o, fmt.Errorf("status.current_metrics[%d]: %w", i, err)
		}
		o.CurrentMetrics = append(o.CurrentMetrics, ms)
	}
	return o, nil
}

// metricStatus reads an API metric status in engine terms.
func metricStatus(m *setpointv1.MetricStatus) (engine.MetricStatus, error) {
	out := engine.MetricStatus{Type: engine.MetricSourceType(m.GetType())}
	var cur *setpointv1.MetricValueStatus
	var id *setpointv1.MetricIdentifier
	switch out.Type {
	case engine.ResourceSource:
		out.Resource, cur = m.GetResource().GetName(), m.GetResource().GetCurrent()
	case engine.ContainerResourceSource:
		c := m.GetContainerResource()
		out.Resource, out.Container, cur = c.GetName(), c.GetContainer(), c.GetCurrent()
	case engine.PodsSource:
		id, cur = m.GetPods().GetMetric(), m.GetPods().GetCurrent()
	case engine.ObjectSource:
		o := m.GetObject()
		id, cur = o.GetMetric(), o.GetCurrent()
		ref := o.GetDescribedObject()
		out.DescribedObject = engine.ObjectReference{APIVersion: ref.GetApiVersion(), Kind: ref.GetKind(), Name: ref.GetName()}
	case engine.ExternalSource:
		id, cur = m.GetExternal().GetMetric(), m.GetExternal().GetCurrent()
	case "":
		return out, nil
	default:
		return out, fmt.Errorf("unknown type %q", out.Type)
	}
	if id != nil {
		out.Metric = engine.MetricIdentifier{Name: id.GetName(), Selector: selector(id.GetSelector())}
	}
	var err error
	if out.Value, err = quantity(cur.GetValue()); err != nil {
		return out, err
	}
	if out.AverageValue, err = quantity(cur.GetAverageValue()); err != nil {
		return out, err
	}
	if cur.AverageUtilization != nil {
		u := cur.GetAverageUtilization()
		out.AverageUtilization = &u
	}
	return out, nil
}

func selector(s *setpointv1.LabelSelector) *engine.LabelSelector {
	if s == nil {
		return nil
	}
	out := &engine.LabelSelector{MatchLabels: s.GetMatchLabels()}
	for _, e := range s.GetMatchExpressions() {
		out.MatchExpressions = append(out.MatchExpressions, engine.LabelSelectorRequirement{Key: e.GetKey(), Operator: e.GetOperator(), Values: e.GetValues()})
	}
	return out
}

// quantity reads a quantity of the API as the engine's milli-value, exactly.
// Not with MilliValue: for a negative quantity of 19 or more significant
// digits, apimachinery's MilliValue takes a fast path that truncates the
// mantissa to 64 bits ("-1063726787889721773m" gives 4709120739521), so a
// wrapped average Setpoint answered would read back as another number.
// Setpoint's quantities are resource.NewMilliQuantity strings, whose
// milli-values an int64 holds; any other is an error.
func quantity(s string) (*engine.Quantity, error) {
	if s == "" {
		return nil, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return nil, err
	}
	milli, err := exactMilli(q)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", s, err)
	}
	return &engine.Quantity{Milli: milli, Format: engine.QuantityFormat(q.Format)}, nil
}

// exactMilli is q in thousandths, when that is an integer an int64 holds.
func exactMilli(q resource.Quantity) (int64, error) {
	d := q.AsDec() // q = unscaled × 10^-scale
	milli := new(big.Int).Set(d.UnscaledBig())
	shift := 3 - int64(d.Scale())
	pow := new(big.Int).Exp(big.NewInt(10), big.NewInt(max(shift, -shift)), nil)
	if shift >= 0 {
		milli.Mul(milli, pow)
	} else if _, rem := milli.QuoRem(milli, pow, new(big.Int)); rem.Sign() != 0 {
		return 0, errors.New("not a whole number of thousandths")
	}
	if !milli.IsInt64() {
		return 0, errors.New("milli-value beyond int64")
	}
	return milli.Int64(), nil
}
