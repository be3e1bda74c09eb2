package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/setpointhq/setpoint/internal/testkit"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The server on the default bbolt store reports its group commit, file
// and record cache on /metrics: after the start-up expiry pass's write and
// four decisions of one target, four more writes in at most four commits,
// two cache misses and two hits, and a file of some size.
func TestRunReportsBoltMetrics(t *testing.T) {
	cfg := defaults(t, "-insecure-dev", "-listen", "127.0.0.1:0", "-metrics-listen", "127.0.0.1:0",
		"-data-dir", filepath.Join(t.TempDir(), "data"))
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan listening, 1), make(chan error, 1)
	go func() { done <- run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), ready) }()
	addrs := <-ready
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	conn, err := grpc.NewClient(addrs.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := setpointv1.NewAutoscalerServiceClient(conn)
	// The expiry loop's pass at start (server's expireLoop) is one write:
	// waited for, so that the decisions' writes are the rest.
	const startWrites = 1
	testkit.Eventually(t, 10*time.Second, "the start-up expiry pass's write", func() error {
		if !strings.Contains(scrape(t, "http://"+addrs.http+"/metrics"), fmt.Sprintf("\nsetpoint_bolt_writes_total %d\n", startWrites)) {
			return errors.New("not yet")
		}
		return nil
	})
	const decisions = 4
	for range decisions {
		if _, err := client.Recommend(t.Context(), cpuRequest(time.Now())); err != nil {
			t.Fatalf("Recommend: %v", err)
		}
	}

	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(scrape(t, "http://"+addrs.http+"/metrics")))
	if err != nil {
		t.Fatal(err)
	}
	value := func(name string) float64 {
		f := families[name]
		if f == nil || len(f.Metric) != 1 {
			t.Errorf("/metrics: %s missing or not one series", name)
			return -1
		}
		m := f.Metric[0]
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
		return -1
	}
	commits := value("setpoint_bolt_commits_total")
	tests := []struct {
		name   string
		ok     func(float64) bool
		expect string
	}{
		{"setpoint_bolt_writes_total", func(v float64) bool { return v == startWrites+decisions }, "the start's and the decisions'"},
		{"setpoint_bolt_commits_total", func(v float64) bool { return v >= 1+startWrites && v <= startWrites+decisions }, "the start's, then 1 to the decisions"},
		{"setpoint_bolt_commit_duration_seconds", func(v float64) bool { return v == commits }, "one observation per commit"},
		{"setpoint_bolt_batch_held_seconds", func(v float64) bool { return v == commits }, "one observation per commit"},
		{"setpoint_bolt_batch_writes", func(v float64) bool { return v == commits }, "one observation per commit"},
		{"setpoint_bolt_file_bytes", func(v float64) bool { return v > 0 }, "> 0"},
	}
	for _, tt := range tests {
		if v := value(tt.name); !tt.ok(v) {
			t.Errorf("%s = %v, want %s", tt.name, v, tt.expect)
		}
	}
	if f := families["setpoint_bolt_batch_writes"]; f != nil && len(f.Metric) == 1 {
		if sum := f.Metric[0].Histogram.GetSampleSum(); sum != startWrites+decisions {
			t.Errorf("setpoint_bolt_batch_writes_sum = %v, want %d", sum, startWrites+decisions)
		}
	}
	if f := families["setpoint_bolt_commit_duration_seconds"]; f == nil || f.GetType().String() != "HISTOGRAM" {
		t.Errorf("setpoint_bolt_commit_duration_seconds is not a histogram: %v", f)
	}
}

// cpuRequest is a Recommend request for one target of one running pod
// using 400m of its 500m cpu against a 50% utilization target, at now.
func cpuRequest(now time.Time) *setpointv1.RecommendRequest {
	start := timestamppb.New(now.Add(-time.Hour))
	return &setpointv1.RecommendRequest{
		Target: &setpointv1.TargetKey{Cluster: "eu1", Namespace: "shop", Name: "web"},
		Spec: &setpointv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: &setpointv1.CrossVersionObjectReference{ApiVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MaxReplicas:    10,
			Metrics: []*setpointv1.MetricSpec{{Type: "Resource", Resource: &setpointv1.ResourceMetricSource{
				Name: "cpu", Target: &setpointv1.MetricTarget{Type: "Utilization", AverageUtilization: testkit.Ptr[int32](50)}}}},
		},
		Scale: &setpointv1.Scale{Replicas: 1, StatusReplicas: 1, Selector: "app=web"},
		Pods: []*setpointv1.Pod{{Name: "web-0", Phase: "Running", StartTime: start,
			Ready:      &setpointv1.PodReadyCondition{Status: "True", LastTransitionTime: start},
			Containers: []*setpointv1.Container{{Name: "app", Requests: map[string]string{"cpu": "500m"}}}}},
		ResourceMetrics: &setpointv1.ResourceMetrics{Items: []*setpointv1.PodMetrics{{
			Pod: "web-0", Timestamp: timestamppb.New(now.Add(-15 * time.Second)), Window: durationpb.New(30 * time.Second),
			Containers: []*setpointv1.ContainerMetrics{{Name: "app", Usage: map[string]string{"cpu": "400m"}}}}}},
		Observations: []*setpointv1.MetricObservation{{}},
	}
}

// TestDocsListStoreMetrics: docs/metrics.md names every metric of both
// stores (deploy/grafana's test sees only the server's and the agent's).
func TestDocsListStoreMetrics(t *testing.T) {
	b, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range storeMetricNames(t) {
		if !strings.Contains(string(b), "`"+name+"`") {
			t.Errorf("docs/metrics.md does not list %s", name)
		}
	}
}

// storeMetricNames returns the names of the metrics setpoint-server
// registers for its stores (bbolt's, etcd's).
func storeMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	em := newStoreMetrics()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, c := range []prometheus.Collector{newBoltMetrics(), em.latency, em.conflicts} {
		ch := make(chan *prometheus.Desc)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := fqName.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("no name in %s", d)
			}
			names[m[1]] = true
		}
	}
	return names
}

// TestDashboardStoreMetrics: every store metric the Grafana dashboard
// (deploy/grafana/setpoint.json) references is one setpoint-server
// registers, and the dashboard shows the bbolt store's flushes,
// checkpoints and record cache.
func TestDashboardStoreMetrics(t *testing.T) {
	b, err := os.ReadFile("../../deploy/grafana/setpoint.json")
	if err != nil {
		t.Fatal(err)
	}
	registered := storeMetricNames(t)
	used := map[string]bool{}
	for _, m := range regexp.MustCompile(`setpoint_(?:bolt|etcd)_[a-z_]+`).FindAllString(string(b), -1) {
		base := m
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(m, suffix); ok && registered[b] {
				base = b
			}
		}
		used[base] = true
		if !registered[base] {
			t.Errorf("the dashboard references %s, which setpoint-server does not register", m)
		}
	}
	for _, want := range []string{"setpoint_bolt_commits_total", "setpoint_bolt_checkpoints_total", "setpoint_bolt_checkpoint_seconds_total", "setpoint_bolt_commit_duration_seconds"} {
		if !used[want] {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
}
