// Package forecasting is the decision of a target that forecasts: its
// stored per-metric histories (target.Record.Forecasts) propose the
// replicas their forecasts need one lead time ahead, target.Decide
// decides, and the decision's metrics are added to the histories. Recommend
// runs it on the stored record inside the store's Decide; Simulate runs it
// on its in-memory record at every step, so a simulation forecasts exactly
// as the server would. Decide is pure: it reads no clock and writes only
// the record it is given.
package forecasting

import (
	"time"

	"github.com/setpointhq/setpoint/forecast"
	"github.com/setpointhq/setpoint/target"
)

// MaxMetrics bounds the metrics of a target that are forecast, and so its
// stored histories: at most 8 × forecast.MaxBytes (34,808 bytes) plus the
// metrics' names per target. The first metrics of the spec are forecast;
// the others are decided as without a forecast.
const MaxMetrics = 8

// MaxName bounds the name of a forecast metric (the explanation's name,
// which names its proposal): a metric with a longer name is not forecast,
// so that its proposal stays within the engine's bounds.
const MaxName = 512

// Decide is target.Decide for a target that forecasts with cfg: the
// histories of rec.Forecasts each propose their forecast at now (fitted
// through models: silent until they can predict), the proposals join in's,
// the decision is made, and its metrics' demands are added to the
// histories (forecast.Sample), which rec.Forecasts then holds. A history
// that does not decode starts again empty. It returns why each metric of
// the decision proposed no forecast, one line per metric ("forecast
// <metric>: no forecast; 24h0m0s: 10h0m0s of history, 48h0m0s needed"),
// in the order of the stored histories, then of the metrics that had none.
// On an error rec is unchanged.
func Decide(rec *target.Record, in target.Input, cfg forecast.Config, models *forecast.Cache, id string, now time.Time) (silent []string, err error) {
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
		fc, ok := m.Predict(now)
		switch {
		case ok:
			ps = append(ps, fc.Proposal(f.Metric))
		case m.Silent != "":
			silent = append(silent, "forecast "+f.Metric+": "+m.Silent)
		default:
			silent = append(silent, "forecast "+f.Metric+": no forecast at this time (the history ends more than an hour before it, or its past periods are unknown at that time)")
		}
	}
	in.Engine.Proposals = ps
	if err := target.Decide(rec, in, id, now); err != nil {
		return nil, err
	}
	last := rec.Last
	var out []target.MetricHistory
	seen := make(map[string]bool, len(last.Decision.Explanation.Metrics))
	for _, m := range last.Decision.Explanation.Metrics {
		if len(out) == MaxMetrics || len(m.Name) > MaxName || seen[m.Name] {
			continue // names that repeat are ambiguous: the first is kept
		}
		seen[m.Name] = true
		h := byName[m.Name]
		if h == nil {
			h = new(forecast.History)
			silent = append(silent, "forecast "+m.Name+": no forecast: no history yet (it starts with this decision)")
		}
		forecast.Sample(h, m, last.From, last.At)
		b, err := h.MarshalBinary()
		if err != nil {
			return nil, err
		}
		out = append(out, target.MetricHistory{Metric: m.Name, History: string(b)})
	}
	rec.Forecasts = out
	return silent, nil
}
