package server

import (
	"time"

	"github.com/setpointhq/setpoint/forecast"
	"github.com/setpointhq/setpoint/target"
)

// maxForecastMetrics bounds the metrics of a target that are forecast, and
// so its stored histories: at most 8 × forecast.MaxBytes (34,808 bytes)
// plus the metrics' names per target. The first metrics of the spec are
// forecast; the others are decided as without a forecast.
const maxForecastMetrics = 8

// maxForecastName bounds the name of a forecast metric (the explanation's
// name, which names its proposal): a metric with a longer name is not
// forecast, so that its proposal stays within the engine's bounds.
const maxForecastName = 512

// decideForecast is target.Decide for a target that forecasts with cfg:
// the stored histories of rec.Forecasts each propose their forecast at now
// (forecast.Propose: silent until they can predict), the proposals join
// in's, the decision is made, and its metrics' demands are added to the
// histories (forecast.Sample), which rec.Forecasts then holds. A history
// that does not decode starts again empty. Pure, as target.Decide is; on
// an error rec is unchanged.
func decideForecast(rec *target.Record, in target.Input, cfg forecast.Config, id string, now time.Time) error {
	hs := make([]forecast.History, len(rec.Forecasts))
	byName := make(map[string]*forecast.History, len(rec.Forecasts))
	ps := in.Engine.Proposals[:len(in.Engine.Proposals):len(in.Engine.Proposals)]
	for i, f := range rec.Forecasts {
		if _, dup := byName[f.Metric]; dup || hs[i].UnmarshalBinary([]byte(f.History)) != nil {
			hs[i] = forecast.History{}
			continue
		}
		byName[f.Metric] = &hs[i]
		if p, ok := forecast.Propose(&hs[i], f.Metric, cfg, now); ok {
			ps = append(ps, p)
		}
	}
	in.Engine.Proposals = ps
	if err := target.Decide(rec, in, id, now); err != nil {
		return err
	}
	last := rec.Last
	var out []target.MetricHistory
	seen := make(map[string]bool, len(last.Decision.Explanation.Metrics))
	for _, m := range last.Decision.Explanation.Metrics {
		if len(out) == maxForecastMetrics || len(m.Name) > maxForecastName || seen[m.Name] {
			continue // names that repeat are ambiguous: the first is kept
		}
		seen[m.Name] = true
		h := byName[m.Name]
		if h == nil {
			h = new(forecast.History)
		}
		forecast.Sample(h, m, last.From, last.At)
		b, err := h.MarshalBinary()
		if err != nil {
			return err
		}
		out = append(out, target.MetricHistory{Metric: m.Name, History: string(b)})
	}
	rec.Forecasts = out
	return nil
}
