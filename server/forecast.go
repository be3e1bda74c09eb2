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

// models keeps the models fitted to targets' histories: a target's
// history changes its closed steps once per forecast.Step (10 minutes), and
// a Recommend comes every sync (15 s), so most Recommends find their model
// here instead of fitting it again (0.3-0.6 ms; docs/ahead-of-load.md). A
// model is a function of the history and the settings, which key it, so
// the decision is the same with or without the cache. Bounded at 1,024
// models of at most about 25 KiB (a full history's): 25 MiB, the least
// recently used dropped first. With more forecasting targets than that
// deciding in turn, the models are fitted at every decision again.
var models = forecast.NewCache(1024)

// decideForecast is target.Decide for a target that forecasts with cfg:
// the stored histories of rec.Forecasts each propose their forecast at now
// (fitted through models: silent until they can predict), the proposals join
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
		m := models.Fit(&hs[i], cfg)
		if fc, ok := m.Predict(now); ok {
			ps = append(ps, fc.Proposal(f.Metric))
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
