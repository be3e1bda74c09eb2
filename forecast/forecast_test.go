package forecast_test

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/forecast"
)

var t0 = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC) // a Monday

// daily is a demand between 5 and 25 replicas peaking at 14:00.
func daily(t time.Time) float64 {
	h := float64(t.Sub(t0)%forecast.Day) / float64(time.Hour)
	return 15 - 10*math.Cos(2*math.Pi*(h-2)/24)
}

// weekly is daily on weekdays and a flat 5 at weekends.
func weekly(t time.Time) float64 {
	if wd := t.Weekday(); wd == time.Saturday || wd == time.Sunday {
		return 5
	}
	return daily(t)
}

// fill adds a sample of f every 15 s for d from t0, plus noise of the
// given fraction.
func fill(f func(time.Time) float64, d time.Duration, noise float64, seed uint64) *forecast.History {
	r := rand.New(rand.NewPCG(seed, 1))
	var h forecast.History
	for t := t0; t.Before(t0.Add(d)); t = t.Add(15 * time.Second) {
		h.Add(t, f(t)*(1+noise*r.NormFloat64()))
	}
	return &h
}

func TestFitFindsThePeriod(t *testing.T) {
	cfg := forecast.Config{Lead: 5 * time.Minute}
	cases := []struct {
		name       string
		f          func(time.Time) float64
		days       int
		noise      float64
		wantPeriod time.Duration
		silent     string // substring of Silent when wantPeriod is 0
	}{
		{"daily, three days", daily, 3, 0, forecast.Day, ""},
		{"daily with 10% noise", daily, 3, 0.1, forecast.Day, ""},
		{"daily, one day is too little", daily, 1, 0, 0, "48h0m0s needed"},
		{"weekly, fifteen days", weekly, 15, 0.05, forecast.Week, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := fill(tc.f, time.Duration(tc.days)*forecast.Day, tc.noise, 1)
			m := forecast.Fit(h, cfg)
			if m.Period != tc.wantPeriod || !strings.Contains(m.Silent, tc.silent) {
				t.Fatalf("period %s, silent %q; want %s, %q", m.Period, m.Silent, tc.wantPeriod, tc.silent)
			}
			if m.Period == 0 {
				return
			}
			now := h.End()
			f, ok := m.Predict(now)
			want := tc.f(now.Add(cfg.Lead))
			if !ok || math.Abs(f.Predicted-want) > 0.1*want+0.5 {
				t.Errorf("predicted %.2f at %s; want %.2f ± 10%%", f.Predicted, f.At, want)
			}
			if f.Upper < f.Predicted || f.Confidence <= 0.8 || f.Horizon != cfg.Lead {
				t.Errorf("forecast %+v; want upper ≥ predicted, confidence > 0.8, horizon the lead", f)
			}
		})
	}
}

func TestFitStaysSilentOnAperiodicDemand(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	walk := 20.0
	var h forecast.History
	for t := t0; t.Before(t0.Add(15 * forecast.Day)); t = t.Add(15 * time.Second) {
		walk = max(1, walk+0.05*r.NormFloat64())
		h.Add(t, walk)
	}
	m := forecast.Fit(&h, forecast.Config{Lead: 5 * time.Minute})
	if m.Period != 0 || !strings.Contains(m.Silent, "autocorrelation") {
		t.Errorf("random walk: period %s, silent %q; want silent for its autocorrelation", m.Period, m.Silent)
	}
	if _, ok := m.Predict(h.End()); ok {
		t.Error("a silent model predicted")
	}
}

func TestFitSilentAboveTheErrorBound(t *testing.T) {
	h := fill(daily, 3*forecast.Day, 0.3, 3) // 30% noise
	m := forecast.Fit(h, forecast.Config{Lead: 5 * time.Minute, MaxError: 0.05, MinCorrelation: 0.01})
	if m.Period != 0 || !strings.Contains(m.Silent, "backtest error") {
		t.Errorf("period %s, silent %q; want silent for its backtest error", m.Period, m.Silent)
	}
}

func TestPredictStaleHistory(t *testing.T) {
	h := fill(daily, 3*forecast.Day, 0, 1)
	m := forecast.Fit(h, forecast.Config{Lead: 5 * time.Minute})
	if _, ok := m.Predict(h.End().Add(2 * time.Hour)); ok {
		t.Error("predicted from a history two hours old")
	}
}

func TestProposal(t *testing.T) {
	f := forecast.Forecast{Period: forecast.Day, Horizon: 5 * time.Minute, At: t0, Predicted: 11.2, Upper: 12.01, Confidence: 0.93, Correlation: 0.97}
	p := f.Proposal("cpu")
	if p.Kind != engine.ProposalForecast || p.Replicas != 13 || p.Name != "forecast cpu" {
		t.Errorf("proposal %+v; want a Forecast of 13 replicas named forecast cpu", p)
	}
	for _, s := range []string{"daily", "horizon 5m0s", "11.2 replicas", "confidence 93%"} {
		if !strings.Contains(p.Explanation, s) {
			t.Errorf("explanation %q lacks %q", p.Explanation, s)
		}
	}
}

func TestDemand(t *testing.T) {
	cases := []struct {
		m    engine.MetricExplanation
		cur  int32
		want float64
		ok   bool
	}{
		{engine.MetricExplanation{Outcome: engine.OutcomeScaled, Ratio: 1.5, ReadyPods: 4, MissingPods: 1}, 5, 6, true},
		{engine.MetricExplanation{Outcome: engine.OutcomeWithinTolerance, Ratio: 0.5}, 8, 4, true},
		{engine.MetricExplanation{Outcome: engine.OutcomeFailed}, 8, 0, false},
	}
	for _, tc := range cases {
		got, ok := forecast.Demand(tc.m, tc.cur)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Demand(%+v, %d) = %v, %v; want %v, %v", tc.m, tc.cur, got, ok, tc.want, tc.ok)
		}
	}
}

func TestHistoryBoundedAndRoundTrips(t *testing.T) {
	var h forecast.History
	for i := range 20 * 24 * 60 { // 20 days, a sample a minute, growing
		h.Add(t0.Add(time.Duration(i)*time.Minute), float64(i%600)*float64(1+i/10000))
	}
	if len(h.Points) != forecast.Capacity {
		t.Errorf("%d points; want Capacity %d", len(h.Points), forecast.Capacity)
	}
	b, err := h.MarshalBinary()
	if err != nil || len(b) != forecast.MaxBytes {
		t.Fatalf("encoded %d bytes, %v; want MaxBytes %d", len(b), err, forecast.MaxBytes)
	}
	var got forecast.History
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(h, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if err := got.UnmarshalBinary(b[:len(b)-1]); !errors.Is(err, forecast.ErrEncoding) {
		t.Errorf("truncated: %v; want ErrEncoding", err)
	}
	var empty forecast.History
	b, _ = empty.MarshalBinary()
	if err := got.UnmarshalBinary(b); err != nil || !cmp.Equal(got, forecast.History{Points: []uint16{}}) {
		t.Errorf("empty round trip: %+v, %v", got, err)
	}
}

func TestHistoryMeansGapsAndScale(t *testing.T) {
	var h forecast.History
	h.Add(t0, 2)
	h.Add(t0.Add(time.Minute), 4)             // same step: mean 3
	h.Add(t0.Add(25*time.Minute), 100)        // step 2: step 1 missing; the scale grows
	h.Add(t0.Add(-time.Minute), 1000)         // before the start: dropped
	h.Add(t0.Add(30*time.Minute), math.NaN()) // not a number: dropped
	h.Add(t0.Add(31*time.Minute), 10)         // step 3 closes step 2 (100)
	got := h.Values()
	if len(got) != 3 || math.Abs(got[0]-3) > 0.01 || !math.IsNaN(got[1]) || math.Abs(got[2]-100) > 0.01 {
		t.Errorf("values %v; want [3 NaN 100]", got)
	}
	if h.End() != t0.Add(30*time.Minute) {
		t.Errorf("end %s; want t0+30m", h.End())
	}
}

func BenchmarkFit(b *testing.B) {
	h := fill(weekly, 15*forecast.Day, 0.05, 1)
	cfg := forecast.Config{Lead: 5 * time.Minute}
	for b.Loop() {
		m := forecast.Fit(h, cfg)
		if _, ok := m.Predict(h.End()); !ok {
			b.Fatal("silent")
		}
	}
}

// BenchmarkPredict measures a forecast from a fitted model: what a
// decision pays between refits.
func BenchmarkPredict(b *testing.B) {
	h := fill(weekly, 15*forecast.Day, 0.05, 1)
	m := forecast.Fit(h, forecast.Config{Lead: 5 * time.Minute})
	now := h.End()
	for b.Loop() {
		if _, ok := m.Predict(now); !ok {
			b.Fatal("silent")
		}
	}
}

// BenchmarkHistoryDecision measures what a decision would pay for a full
// history kept with its record: decode, add the sample, encode.
func BenchmarkHistoryDecision(b *testing.B) {
	h := fill(weekly, 15*forecast.Day, 0.05, 1)
	enc, _ := h.MarshalBinary()
	at := h.End()
	b.SetBytes(int64(len(enc)))
	for b.Loop() {
		var g forecast.History
		if err := g.UnmarshalBinary(enc); err != nil {
			b.Fatal(err)
		}
		g.Add(at, 12)
		if _, err := g.MarshalBinary(); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzHistoryDecode: any bytes either fail to decode with ErrEncoding or
// decode to a history that encodes back to the same bytes and can take
// samples and be fitted.
func FuzzHistoryDecode(f *testing.F) {
	h := fill(daily, 3*forecast.Day, 0.05, 1)
	b, _ := h.MarshalBinary()
	f.Add(b)
	var empty forecast.History
	b, _ = empty.MarshalBinary()
	f.Add(b)
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		var h forecast.History
		if err := h.UnmarshalBinary(b); err != nil {
			if !errors.Is(err, forecast.ErrEncoding) {
				t.Fatalf("error %v does not match ErrEncoding", err)
			}
			return
		}
		again, err := h.MarshalBinary()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs: %v\n%x\n%x", err, b, again)
		}
		h.Add(h.End().Add(time.Minute), 3)
		if len(h.Points) > forecast.Capacity {
			t.Fatalf("%d points after Add; Capacity is %d", len(h.Points), forecast.Capacity)
		}
		m := forecast.Fit(&h, forecast.Config{Lead: time.Minute})
		m.Predict(h.End())
	})
}

// The margin above the prediction follows where the backtest missed: wide
// at a steep daily ramp, narrow on the quiet night.
func TestMarginFollowsTheBacktestError(t *testing.T) {
	// 2 at night, 20 by day: a ramp of 10 minutes that starts at 08:00
	// give or take 10 minutes from day to day, and a slow decline at
	// 18:00.
	ramp := func(t time.Time) float64 {
		d := int(t.Sub(t0) / forecast.Day)
		start := 8 + []float64{0, 10, -10, 5, -5}[d%5]/60
		h := float64(t.Sub(t0)%forecast.Day) / float64(time.Hour)
		return 2 + 18*math.Min(math.Max((h-start)*6, 0), 1) - 18*math.Min(math.Max((h-18)/3, 0), 1)
	}
	// margin fits a history of four days and the given time, and returns
	// the margin of the forecast made when it ends.
	margin := func(clock time.Duration) (float64, forecast.Model) {
		h := fill(ramp, 4*forecast.Day+clock, 0.02, 1)
		m := forecast.Fit(h, forecast.Config{Lead: 5 * time.Minute})
		f, ok := m.Predict(h.End())
		if !ok || m.Period != forecast.Day {
			t.Fatalf("at %s: no daily forecast (%s)", clock, m.Silent)
		}
		return f.Upper - f.Predicted, m
	}
	night, _ := margin(3*time.Hour + 5*time.Minute)   // forecasting 03:05
	ramping, m := margin(8*time.Hour + 5*time.Minute) // forecasting 08:05
	t.Logf("margin %.2f at night, %.2f at the ramp, RMSE %.2f", night, ramping, m.RMSE)
	if !(night >= 0 && ramping > 3*night && ramping > 1) {
		t.Errorf("margin %.2f at night, %.2f at the ramp; want the ramp's over 1 and 3 times the night's", night, ramping)
	}
	if !(m.RMSE > night && m.RMSE < ramping) {
		t.Errorf("overall RMSE %.2f; want it between the night's margin %.2f and the ramp's %.2f", m.RMSE, night, ramping)
	}
}
