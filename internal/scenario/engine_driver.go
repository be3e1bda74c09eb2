package scenario

import (
	"context"
	"strconv"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/convert"
	"github.com/setpointhq/setpoint/target"
)

// EngineDriver replays a scenario through the target's transitions
// (target.Decide and target.Observe) on a record kept in memory, as the
// server runs them on a stored one. Requests are resolved by
// server/convert, as the server resolves them; a spec edit reaches the
// record with the next decision, and nothing else changes with it.
type EngineDriver struct {
	rec       target.Record
	decisions int
}

// Decide implements Driver.
func (d *EngineDriver) Decide(_ context.Context, req *setpointv1.RecommendRequest, now time.Time) (Outcome, error) {
	in, err := convert.Input(req, now)
	if err != nil {
		return Outcome{}, err
	}
	d.decisions++
	ti := target.Input{Ref: convert.TargetRef(req.GetSpec().GetScaleTargetRef()), Engine: in}
	if err := target.Decide(&d.rec, ti, strconv.Itoa(d.decisions), now); err != nil {
		return Outcome{}, err
	}
	return OutcomeOf(d.rec.Last.Decision), nil
}

// Applied implements Driver: it reports the last decision applied.
func (d *EngineDriver) Applied(_ context.Context, from, to int32, at time.Time) error {
	id := ""
	if d.rec.Last != nil {
		id = d.rec.Last.ID
	}
	return target.Observe(&d.rec, target.Observation{Kind: target.EventApplied, DecisionID: id, From: from, To: to}, at)
}
