package server_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/forecast"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/target"
)

// benchRuns tells BenchmarkRecommendForecast's runs apart.
var benchRuns atomic.Int64

// BenchmarkRecommendForecast is the cost of a Recommend (10 pods, one
// caller, the real bbolt store) without a forecast and with one whose
// target holds a full history (15 days of a daily load: a fit, a
// prediction, and the history decoded, sampled and encoded on every call),
// in the same run. "on" decides a millisecond apart, so the model fitted
// to the history is found in the server's cache (as for 39 of the 40
// Recommends of a 10-minute step at a 15 s sync); "on-refit" decides a
// step apart, so every call closes a step and fits the history again.
func BenchmarkRecommendForecast(b *testing.B) {
	histEnd := dayStart.Add(15 * 24 * time.Hour)
	for _, bc := range []struct {
		name string
		on   bool
		tick time.Duration
	}{{"off", false, time.Millisecond}, {"on", true, time.Millisecond}, {"on-refit", true, forecast.Step}} {
		on := bc.on
		b.Run(bc.name, func(b *testing.B) {
			var ticks atomic.Int64
			now := func() time.Time { return histEnd.Add(time.Duration(ticks.Add(1)) * bc.tick) }
			ts := start(b, setup{opts: server.Options{Now: now}})
			c := ts.client(b)
			req := loadRequest("web", histEnd, 4)
			if on {
				forecastOn(req)
				if _, err := c.Recommend(b.Context(), req); err != nil {
					b.Fatal(err)
				}
				var h forecast.History
				for at := histEnd.Add(-time.Duration(forecast.Capacity) * forecast.Step); at.Before(histEnd); at = at.Add(forecast.Step) {
					// Another load for each run: the server's cache of
					// models is the process's, and must not know it.
					h.Add(at, dailyDemand(at)*(1+float64(benchRuns.Add(1)%1000)*1e-6))
				}
				enc, err := h.MarshalBinary()
				if err != nil {
					b.Fatal(err)
				}
				k := target.Key{Cluster: "eu1", Namespace: "shop", Name: "web"}
				if _, err := ts.store.Update(b.Context(), k, func(rec *target.Record) error {
					rec.Forecasts[0].History = string(enc)
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
			cpu0 := processCPU(b)
			b.ResetTimer()
			for range b.N {
				if _, err := c.Recommend(b.Context(), req); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			rec, err := ts.store.Get(b.Context(), target.Key{Cluster: "eu1", Namespace: "shop", Name: "web"})
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for _, f := range rec.Forecasts {
				n += len(f.Metric) + len(f.History)
			}
			if on != (n > 4000) {
				b.Fatalf("forecast %v: %d bytes of stored history", on, n)
			}
			b.ReportMetric(float64(n), "history-B")
		})
	}
}
