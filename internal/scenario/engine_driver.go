package scenario

import (
	"context"
	"strconv"
	"time"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/target"
)

// EngineDriver replays a scenario through the target's transitions
// (target.Decide and target.Observe) on a record kept in memory, as the
// server runs them on a stored one.
type EngineDriver struct {
	rec       target.Record
	decisions int
}

// Decide implements Driver.
func (d *EngineDriver) Decide(_ context.Context, in engine.Input) (Outcome, error) {
	d.decisions++
	if err := target.Decide(&d.rec, target.Input{Engine: in}, strconv.Itoa(d.decisions), in.Now); err != nil {
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
