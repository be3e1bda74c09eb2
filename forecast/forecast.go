// Package forecast predicts a target's demand one lead time ahead from a
// compact history of it, and turns the prediction into a proposal for the
// engine, which merges it by max with the metrics' proposal: a forecast
// can add replicas before the load arrives, never remove them on its own.
//
// # Demand and history
//
// Demand is a metric's load in replicas needed at its target: the usage
// ratio times the pods it was measured on (Demand). A History keeps its
// mean per 10-minute step for 15 days, quantized to 16 bits: at most
// MaxBytes (4,351 bytes) per metric of a target, whatever the load.
//
// # Model
//
// Fit looks for a daily or a weekly period: the autocorrelation (gonum's
// stat.Correlation) at that lag of the history's hour-over-hour changes,
// which is high for a repeating shape, trend or not, and near zero for a
// random walk or random spikes. Each period whose correlation reaches
// Config.MinCorrelation is backtested over the last week (or as much as
// there is): from every step,
// the forecast one lead time ahead is compared with what came; the period
// with the lower error is kept. The forecast for now+lead is the current
// level (the last hour's mean) plus the change the same stretch showed in
// the last periods (up to three days, or two weeks):
//
//	predicted(now+lead) = level(now) + mean_k[ x(now+lead−kP) − level(now−kP) ]
//
// and the proposal covers predicted + a margin, rounded up: the root mean
// square of the backtest's errors at that time of the period (within half
// an hour either side), so that the margin is wide before a steep ramp,
// where the forecast misses most, and narrow on a quiet night, instead of
// one margin paid at every hour.
//
// # Silence
//
// A forecast says nothing until it has two periods of history (two days,
// two weeks), when no period correlates, when its backtest error (RMSE
// over the mean demand) is above Config.MaxError, and when the history is
// more than an hour old. Model.Silent says which.
package forecast

import (
	"fmt"
	"math"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/setpointhq/setpoint/engine"
)

// The periods a forecast looks for.
const (
	Day  = 24 * time.Hour
	Week = 7 * Day
)

// Defaults of Config.
const (
	// DefaultMaxError is the default backtest error bound: 15% of the mean
	// demand.
	DefaultMaxError = 0.15
	// DefaultMinCorrelation is the default autocorrelation a period must
	// reach.
	DefaultMinCorrelation = 0.5
)

// hour is an hour in steps: the level's span and the changes' lag.
const hour = int(time.Hour / Step)

// maxBacktest is the most steps a fit backtests: a week, so that a daily
// and a weekly period are compared over the same days.
const maxBacktest = int(Week / Step)

// maxPeriods bounds the past periods a forecast averages, per period.
var maxPeriods = map[time.Duration]int{Day: 3, Week: 2}

// Config are a forecast's settings.
type Config struct {
	// Lead is how far ahead to forecast: the workload's start-up and
	// readiness time, so that the pods asked for now are ready when the
	// load comes. Must be > 0 and below a day.
	Lead time.Duration
	// MaxError is the backtest error above which the forecast stays
	// silent, as a fraction of the mean demand; 0 selects
	// DefaultMaxError.
	MaxError float64
	// MinCorrelation is the autocorrelation a period must reach; 0
	// selects DefaultMinCorrelation.
	MinCorrelation float64
}

func (c Config) resolved() Config {
	if c.MaxError == 0 {
		c.MaxError = DefaultMaxError
	}
	if c.MinCorrelation == 0 {
		c.MinCorrelation = DefaultMinCorrelation
	}
	return c
}

// Model is a history fitted for forecasting. Its zero value is silent.
type Model struct {
	// Period is the period found: Day, Week, or 0 when silent.
	Period time.Duration
	// Correlation is the autocorrelation of the hour-over-hour changes at
	// Period.
	Correlation float64
	// Error is the backtest's RMSE over the mean demand.
	Error float64
	// RMSE is the backtest's root mean square error, in replicas.
	RMSE float64
	// Silent says why the model makes no forecast; empty when it does.
	Silent string

	cfg    Config
	start  time.Time
	x      []float64
	margin []float64 // by phase of Period (margins)
}

// Fit fits a model to h for cfg. It reads h and keeps a copy of its
// values: h may change afterwards.
func Fit(h *History, cfg Config) Model {
	cfg = cfg.resolved()
	m := Model{cfg: cfg, start: h.Start, x: h.Values()}
	if cfg.Lead <= 0 || cfg.Lead >= Day {
		m.Silent = fmt.Sprintf("lead time %s is not within (0, 24h)", cfg.Lead)
		return m
	}
	lead := int(math.Ceil(float64(cfg.Lead) / float64(Step)))
	best := math.Inf(1)
	reasons := ""
	for _, period := range []time.Duration{Day, Week} {
		p := int(period / Step)
		if len(m.x) < 2*p {
			reasons += fmt.Sprintf("; %s: %s of history, %s needed", period, time.Duration(len(m.x))*Step, 2*period)
			continue
		}
		corr := changeCorrelation(m.x, p)
		if !(corr >= cfg.MinCorrelation) {
			reasons += fmt.Sprintf("; %s: autocorrelation %.2f below %.2f", period, corr, cfg.MinCorrelation)
			continue
		}
		rmse, mean, phaseSq, phaseN := backtest(m.x, p, lead, maxPeriods[period], stepsSinceEpoch(m.start))
		e := rmse / mean
		if !(e <= cfg.MaxError) {
			reasons += fmt.Sprintf("; %s: backtest error %.1f%% above %.1f%%", period, 100*e, 100*cfg.MaxError)
			continue
		}
		if e < best {
			best = e
			m.Period, m.Correlation, m.Error, m.RMSE = period, corr, e, rmse
			m.margin = margins(phaseSq, phaseN, rmse)
		}
	}
	if m.Period == 0 {
		m.Silent = "no forecast" + reasons
	}
	return m
}

// changeCorrelation is the autocorrelation at lag p of x's hour-over-hour
// changes, over the pairs where both are known; NaN when too few are.
func changeCorrelation(x []float64, p int) float64 {
	var a, b []float64
	for i := hour; i+p < len(x); i++ {
		d0, d1 := x[i]-x[i-hour], x[i+p]-x[i+p-hour]
		if !math.IsNaN(d0) && !math.IsNaN(d1) {
			a, b = append(a, d0), append(b, d1)
		}
	}
	if len(a) < p/2 {
		return math.NaN()
	}
	return stat.Correlation(a, b, nil)
}

// level is the mean of the known values of x[i-hour+1 .. i].
func level(x []float64, i int) float64 {
	sum, n := 0.0, 0
	for j := max(i-hour+1, 0); j <= i && j < len(x); j++ {
		if !math.IsNaN(x[j]) {
			sum += x[j]
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}

// seasonal is the mean over up to k past periods of p steps of the change
// from the level at origin-kp to the value at at-kp, where at may be a
// fraction of a step (interpolated); NaN when no period is known.
func seasonal(x []float64, origin int, at float64, p, k int) float64 {
	sum, n := 0.0, 0
	for j := 1; j <= k; j++ {
		base := level(x, origin-j*p)
		fut := interp(x, at-float64(j*p))
		if !math.IsNaN(base) && !math.IsNaN(fut) {
			sum += fut - base
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}

// interp is x at fractional index u, linear between known neighbours.
func interp(x []float64, u float64) float64 {
	if u < 0 || u > float64(len(x)-1) {
		return math.NaN()
	}
	i := int(u)
	f := u - float64(i)
	if f == 0 || i+1 >= len(x) {
		return x[i]
	}
	a, b := x[i], x[i+1]
	switch {
	case math.IsNaN(a):
		return b
	case math.IsNaN(b):
		return a
	}
	return a + f*(b-a)
}

// backtest forecasts, from each of the last steps (up to a week, as many
// as have a period and an hour before them), the value lead steps later
// with period p, and returns the root mean square error and the mean of
// the values forecast, and the squared errors' sum and count by the
// forecast value's phase in the period (x[0] is off steps after the Unix
// epoch).
func backtest(x []float64, p, lead, k, off int) (rmse, mean float64, phaseSq []float64, phaseN []int) {
	var sq, sum float64
	n := 0
	phaseSq, phaseN = make([]float64, p), make([]int, p)
	span := min(maxBacktest, len(x)-p-hour-lead)
	for i := len(x) - lead - span; i+lead < len(x); i++ {
		if i-p-hour < 0 {
			continue
		}
		actual := x[i+lead]
		pred := level(x, i) + seasonal(x, i, float64(i+lead), p, k)
		if math.IsNaN(actual) || math.IsNaN(pred) {
			continue
		}
		e2 := (pred - actual) * (pred - actual)
		sq += e2
		sum += actual
		n++
		ph := phase(off+i+lead, p)
		phaseSq[ph] += e2
		phaseN[ph]++
	}
	if span <= 0 || n < span/2 || sum <= 0 {
		return math.Inf(1), 1, nil, nil
	}
	return math.Sqrt(sq / float64(n)), sum / float64(n), phaseSq, phaseN
}

// marginSpan is how far either side of a time of the period the errors
// that set its margin are taken from: the backtest saw a few periods, and
// a ramp's error spreads over the steps next to it.
const marginSpan = hour / 2

// margins returns, for each phase of the period, the root mean square of
// the backtest's errors within marginSpan of it: small where the forecast
// was exact (a quiet night), large where it missed (a steep ramp); rmse
// where no error was measured near it.
func margins(sq []float64, n []int, rmse float64) []float64 {
	p := len(sq)
	out := make([]float64, p)
	for j := range out {
		var s float64
		var c int
		for d := -marginSpan; d <= marginSpan; d++ {
			s += sq[phase(j+d, p)]
			c += n[phase(j+d, p)]
		}
		out[j] = rmse
		if c > 0 {
			out[j] = math.Sqrt(s / float64(c))
		}
	}
	return out
}

// phase is step i's place in a period of p steps.
func phase(i, p int) int { return ((i % p) + p) % p }

// stepsSinceEpoch is t in steps since the Unix epoch, rounded down.
func stepsSinceEpoch(t time.Time) int {
	return int(math.Floor(float64(t.Unix()) / Step.Seconds()))
}

// Forecast is one prediction of the demand.
type Forecast struct {
	// Period is the period the prediction follows.
	Period time.Duration
	// Horizon is how far ahead of now it predicts: the lead time.
	Horizon time.Duration
	// At is the instant predicted.
	At time.Time
	// Predicted is the demand predicted at At, in replicas at the target.
	Predicted float64
	// Upper is Predicted plus the backtest's root mean square error at
	// At's time of the period (within half an hour): what the proposal
	// covers.
	Upper float64
	// Confidence is 1 minus the backtest error, in [0, 1].
	Confidence float64
	// Correlation is the model's autocorrelation at Period.
	Correlation float64
}

// Predict returns the forecast at now+lead, and false when the model is
// silent, the history ends more than an hour before now, or the past
// periods are unknown at that time of day.
func (m *Model) Predict(now time.Time) (Forecast, bool) {
	if m.Period == 0 {
		return Forecast{}, false
	}
	n := len(m.x)
	end := m.start.Add(time.Duration(n) * Step)
	if now.Sub(end) > time.Hour || now.Before(end.Add(-Step)) {
		return Forecast{}, false
	}
	at := now.Add(m.cfg.Lead)
	u := float64(at.Sub(m.start))/float64(Step) - 0.5
	p := int(m.Period / Step)
	pred := level(m.x, n-1) + seasonal(m.x, n-1, u, p, maxPeriods[m.Period])
	if math.IsNaN(pred) {
		return Forecast{}, false
	}
	pred = max(pred, 0)
	margin := m.RMSE
	if len(m.margin) == p {
		margin = m.margin[phase(stepsSinceEpoch(at), p)]
	}
	return Forecast{
		Period: m.Period, Horizon: m.cfg.Lead, At: at,
		Predicted: pred, Upper: pred + margin,
		Confidence: max(0, 1-m.Error), Correlation: m.Correlation,
	}, true
}

// Proposal is the engine proposal of f for the metric named metric: the
// replicas covering f.Upper, explained.
func (f Forecast) Proposal(metric string) engine.Proposal {
	r := math.Ceil(f.Upper - 1e-9)
	return engine.Proposal{
		Name:     "forecast " + metric,
		Kind:     engine.ProposalForecast,
		Replicas: int32(min(max(r, 0), math.MaxInt32)),
		Explanation: fmt.Sprintf("period %s (autocorrelation %.2f), horizon %s: %.1f replicas of demand predicted at %s, covered up to %.1f; confidence %.0f%%",
			periodName(f.Period), f.Correlation, f.Horizon, f.Predicted, f.At.UTC().Format(time.RFC3339), f.Upper, 100*f.Confidence),
	}
}

func periodName(p time.Duration) string {
	switch p {
	case Day:
		return "daily"
	case Week:
		return "weekly"
	}
	return p.String()
}

// Demand is the demand a metric's explanation shows, in replicas needed at
// its target: the usage ratio times the ready pods it was measured on, or
// times current replicas for Object and External metrics (no pods
// counted). False when the metric failed.
func Demand(m engine.MetricExplanation, current int32) (float64, bool) {
	if m.Outcome == engine.OutcomeFailed || m.Outcome == "" || math.IsNaN(m.Ratio) || math.IsInf(m.Ratio, 0) {
		return 0, false
	}
	pods := m.ReadyPods
	if pods == 0 && m.UnreadyPods == 0 && m.MissingPods == 0 && m.IgnoredPods == 0 {
		pods = current
	}
	return m.Ratio * float64(pods), true
}

// Sample adds to h the demand that m, a metric of a decision made at at
// from current replicas, shows (Demand); false when the metric failed and
// nothing was added.
func Sample(h *History, m engine.MetricExplanation, current int32, at time.Time) bool {
	v, ok := Demand(m, current)
	if ok {
		h.Add(at, v)
	}
	return ok
}
