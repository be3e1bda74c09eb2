package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/testkit"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// scrape GETs a /metrics endpoint and returns its samples: the text
// exposition's "name{labels}" (as written, labels sorted by name) → value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad sample %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return out
}

// wantSamples fails for each sample of want whose value differs in got.
func wantSamples(t *testing.T, got, want map[string]float64) {
	t.Helper()
	for name, w := range want {
		if g, ok := got[name]; !ok || g != w {
			t.Errorf("%s = %v (present %v), want %v", name, g, ok, w)
		}
	}
	if t.Failed() {
		t.Logf("setpoint_ samples: %v", slices.Sorted(maps.Keys(filter(got, "setpoint_"))))
	}
}

func filter(m map[string]float64, prefix string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

// TestServiceMetrics makes real calls over a listener and scrapes the real
// /metrics endpoint.
func TestServiceMetrics(t *testing.T) {
	ts := start(t, setup{})
	c := ts.client(t)
	ctx := t.Context()
	metricsURL := httptest.NewServer(ts.srv.MetricsHandler())
	defer metricsURL.Close()

	// A scale-up (4 pods at 80% of a 50% target: 7), observed applied.
	id := recommendIn(t, c, "eu1", "web", 4)
	if _, err := c.Observe(ctx, &setpointv1.ObserveRequest{Target: key("web"), DecisionId: id,
		Change: &setpointv1.ObserveRequest_Applied{Applied: &setpointv1.AppliedChange{From: 4, To: 7}}}); err != nil {
		t.Fatal(err)
	}
	// A scale-up held back: 2 pods at 1000% propose 40; the legacy rate
	// limit allows max(2×2, 4) = 4.
	req := request("api", 2, t0)
	req.Spec.Behavior = nil
	for _, it := range req.GetResourceMetrics().GetItems() {
		it.GetContainers()[0].Usage["cpu"] = "5"
	}
	if resp, err := c.Recommend(ctx, req); err != nil || resp.GetDecision().GetDesiredReplicas() != 4 {
		t.Fatalf("Recommend api = %v, %v; want 4", resp, err)
	}
	// A decision whose metric fails: error internal.
	req = request("db", 2, t0)
	req.ResourceMetrics = &setpointv1.ResourceMetrics{Error: "metrics-server is down"}
	if _, err := c.Recommend(ctx, req); err != nil {
		t.Fatal(err)
	}
	// An invalid spec: error spec.
	req = request("bad", 2, t0)
	req.Spec.Metrics[0].Resource.Target.AverageUtilization = testkit.Ptr[int32](-5)
	if _, err := c.Recommend(ctx, req); err == nil {
		t.Fatal("invalid spec accepted")
	}
	// Simulations are not decisions.
	if _, err := c.Simulate(ctx, &setpointv1.SimulateRequest{Spec: legacySpec("web"), Steps: []*setpointv1.SimulateStep{step("web", 2, t0, "")}}); err != nil {
		t.Fatal(err)
	}
	// A Watch stream open.
	watchCtx, stopWatch := context.WithCancel(ctx)
	watch(t, watchCtx, c, &setpointv1.WatchRequest{})

	got := scrape(t, metricsURL.URL)
	wantSamples(t, got, map[string]float64{
		`setpoint_server_reconciliations_total{action="scale_up",error="none"}`:                           2,
		`setpoint_server_reconciliations_total{action="none",error="internal"}`:                           1,
		`setpoint_server_reconciliations_total{action="none",error="spec"}`:                               1,
		`setpoint_server_reconciliation_duration_seconds_count{action="scale_up",error="none"}`:           2,
		`setpoint_server_metric_computation_total{action="scale_up",error="none",metric_type="Resource"}`: 2,
		`setpoint_server_metric_computation_total{action="none",error="internal",metric_type="Resource"}`: 1,
		`setpoint_server_metric_outcomes_total{metric_type="Resource",outcome="Scaled"}`:                  2,
		`setpoint_server_metric_outcomes_total{metric_type="Resource",outcome="Failed"}`:                  1,
		`setpoint_server_metric_proposed_replicas_count{metric_type="Resource"}`:                          2,
		`setpoint_server_metric_proposed_replicas_bucket{metric_type="Resource",le="34"}`:                 1, // 7
		`setpoint_server_metric_proposed_replicas_bucket{metric_type="Resource",le="55"}`:                 2, // and 40
		`setpoint_server_decision_limits_total{kind="Limited",reason="ScaleUpLimit"}`:                     1,
		`setpoint_server_desired_replicas_count{action="scale_up"}`:                                       2,
		`setpoint_server_observations_total{kind="Applied"}`:                                              1,
		`setpoint_server_autoscalers`:   3,
		`setpoint_server_feed_revision`: 4,
		`setpoint_server_watch_streams`: 1,
		`grpc_server_handled_total{grpc_code="OK",grpc_method="Simulate",grpc_service="setpoint.v1.AutoscalerService",grpc_type="unary"}`: 1,
	})

	// The target count follows creations and deletions after the first
	// count; the closed stream is no longer counted.
	stopWatch()
	recommendIn(t, c, "eu2", "web", 1)
	for _, name := range []string{"web", "api"} {
		if _, err := c.DeleteTarget(ctx, &setpointv1.DeleteTargetRequest{Target: key(name)}); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, 10*time.Second, "the closed stream to be uncounted", func() error {
		got = scrape(t, metricsURL.URL)
		if n := got[`setpoint_server_watch_streams`]; n != 0 {
			return fmt.Errorf("setpoint_server_watch_streams %v", n)
		}
		return nil
	})
	wantSamples(t, got, map[string]float64{
		`setpoint_server_autoscalers`:   2,
		`setpoint_server_feed_revision`: 7,
		`setpoint_server_watch_streams`: 0,
	})
}
