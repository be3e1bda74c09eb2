package scenario

import (
	"context"
	"time"

	"github.com/setpointhq/setpoint/engine"
)

// EngineDriver replays a scenario directly against engine.Decide, keeping
// status and history in memory as the server would keep them in its store.
type EngineDriver struct {
	// Behavior is the scenario's resolved behavior, used to record scale
	// events.
	Behavior *engine.Behavior
	status   engine.Status
	history  engine.History
}

// Decide implements Driver.
func (d *EngineDriver) Decide(_ context.Context, in engine.Input) (Outcome, error) {
	in.Status = d.status
	dec, err := engine.Decide(in, d.history)
	if err != nil {
		return Outcome{}, err
	}
	d.status, d.history = dec.Status, dec.History
	return OutcomeOf(dec), nil
}

// Applied implements Driver.
func (d *EngineDriver) Applied(_ context.Context, from, to int32, at time.Time) error {
	d.history = engine.RecordScale(d.history, d.Behavior, from, to, at)
	return nil
}
