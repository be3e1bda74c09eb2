package fleets_test

import (
	"testing"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/fleets"
)

// BenchmarkReport: one member's Report over gRPC on loopback to a fleet
// of three members of 100 pods each, on a bbolt store: "decides" steps the
// clock a sync period before each report, so every report makes a fleet
// decision over the three members' reports; "stores" reports within the
// sync period, so each is only stored.
func BenchmarkReport(b *testing.B) {
	for _, bc := range []struct {
		name string
		step time.Duration
	}{{"decides", syncPeriod}, {"stores", time.Nanosecond}} {
		b.Run(bc.name, func(b *testing.B) {
			e := start(b)
			e.put(b, fleetSpec("a", "b", "c"))
			ms := []member{{"a", 100, 300}, {"b", 100, 250}, {"c", 100, 200}}
			for _, m := range ms {
				e.report(b, m)
			}
			c := e.fleets(b, "agent-a")
			req := &setpointv1.ReportRequest{Fleet: fleetKey, Report: ms[0].report(e.clock.Now())}
			b.ReportAllocs()
			for b.Loop() {
				e.clock.Step(bc.step)
				resp, err := c.Report(b.Context(), req)
				if err != nil {
					b.Fatal(err)
				}
				if resp.GetDecided() != (bc.step == syncPeriod) {
					b.Fatalf("decided %v", resp.GetDecided())
				}
			}
			rec, err := e.srv.Store.Get(b.Context(), fleets.Key(fleetKey))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(rec.Fleet)), "state-bytes")
		})
	}
}
