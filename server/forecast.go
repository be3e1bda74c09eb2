package server

import (
	"time"

	"github.com/setpointhq/setpoint/forecast"
	"github.com/setpointhq/setpoint/server/forecasting"
	"github.com/setpointhq/setpoint/target"
)

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

// decideForecast is forecasting.Decide through the server's models: the
// store update of a Recommend whose target forecasts with cfg.
func decideForecast(rec *target.Record, in target.Input, cfg forecast.Config, id string, now time.Time) error {
	_, err := forecasting.Decide(rec, in, cfg, models, id, now)
	return err
}
