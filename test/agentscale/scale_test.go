package main

import (
	"context"
	"math"
	"os"
	"testing"
	"time"
)

// TestSmallScale runs the benchmark at N = 20 with a 2 s sync period,
// serving Autoscalers then HPAs (native mode), so the harness stays
// working and the agent's per-reconcile costs are checked in CI: every
// autoscaler gets a status, an unchanged reconcile makes at most 2
// requests and writes nothing (no status, no annotation), and stopping
// logs nothing per key.
func TestSmallScale(t *testing.T) {
	if os.Getenv("SETPOINT_E2E_SKIP") != "" {
		t.Skip("SETPOINT_E2E_SKIP is set")
	}
	cfg := config{counts: []int{20}, serves: []string{"autoscalers", "hpas"}, syncPeriod: 2 * time.Second, window: 4 * time.Second, podsPer: 2, log: t.Logf}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	points, err := run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(points) != 2 {
		t.Fatalf("%d points, want 2", len(points))
	}
	for _, p := range points {
		t.Logf("%+v", p)
		if p.reconcilesPerSec <= 0 || math.IsNaN(p.intervalP50) {
			t.Errorf("-serve=%s: no steady reconciles: %+v", p.serve, p)
		}
		// 2 requests per reconcile (the Scale, the pod metrics) plus the
		// discovery the agent refreshes once per period (a few GETs over
		// the period's 20 reconciles: 0.05–0.35 per reconcile, by how
		// many refreshes fall in the window); a third request per
		// reconcile would make 3.
		if p.requestsPerReconcile > 2.5 || p.writesPerReconcile > 0.05 {
			t.Errorf("-serve=%s: requests per unchanged reconcile = %.2f (writes %.2f), want ≤ 2 and none", p.serve, p.requestsPerReconcile, p.writesPerReconcile)
		}
		if p.stopErrors != 0 || p.stopKeyLines != 0 {
			t.Errorf("-serve=%s: stopping logged %d error lines and %d per-key lines, want none", p.serve, p.stopErrors, p.stopKeyLines)
		}
	}
}

func TestQuantile(t *testing.T) {
	buckets := map[float64]float64{0.5: 0, 1: 50, 1.2: 99, 2: 100, math.Inf(1): 100}
	tests := []struct {
		q, want float64
	}{
		{0.5, 1},
		{0.25, 0.75},
		{0.99, 1.2},
		{1, 2},
	}
	for _, tt := range tests {
		if got := quantile(buckets, tt.q); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("quantile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
}
