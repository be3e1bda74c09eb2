package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/setpointhq/setpoint/internal/etcdtest"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// The server runs on a 3-member etcd cluster with -store=etcd and reports
// the store's etcd latency and conflicts on /metrics beside its own.
func TestRunOnEtcd(t *testing.T) {
	c := etcdtest.Start(t, 3)
	metricsAddr := freeAddr(t)
	cfg := defaults(t, "-insecure-dev", "-listen", "127.0.0.1:0", "-metrics-listen", metricsAddr,
		"-data-dir", filepath.Join(t.TempDir(), "data"), "-store", "etcd",
		"-etcd-endpoints", strings.Join(c.Endpoints, ","), "-etcd-prefix", "/run-test/")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan listening, 1), make(chan error, 1)
	go func() { done <- run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), ready) }()
	addr := (<-ready).grpc
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health: %v", err)
	}
	// The store's list requests (ListTargets, and the expiry sweep's
	// pages, which may run at any time) are counted: the ListTargets adds
	// at least one.
	const lists = `setpoint_etcd_request_duration_seconds_count{op="list"}`
	before := counter(t, scrape(t, "http://"+metricsAddr+"/metrics"), lists)
	if _, err := setpointv1.NewAutoscalerServiceClient(conn).ListTargets(t.Context(), &setpointv1.ListTargetsRequest{}); err != nil {
		t.Errorf("ListTargets: %v", err)
	}
	metrics := scrape(t, "http://"+metricsAddr+"/metrics")
	if after := counter(t, metrics, lists); after < before+1 {
		t.Errorf("%s went from %d to %d across a ListTargets, want at least one more", lists, before, after)
	}
	for _, want := range []string{
		`setpoint_etcd_conflicts_total{op="commit"} 0`,
		"# TYPE grpc_server_handled_total counter", // the server's own
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, metrics)
		}
	}
	// With every etcd member gone the server says NOT_SERVING.
	for i := range c.Endpoints {
		c.Kill(i)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
		if err == nil && resp.Status == healthpb.HealthCheckResponse_NOT_SERVING {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health with etcd down: %v, %v; want NOT_SERVING", resp, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}

// freeAddr returns a loopback address no one listens on (for a flag that
// does not report the port it got).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// scrape returns the body of a GET of url.
func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
	return string(b)
}

// counter is the value of the series named (name and labels) in metrics,
// the Prometheus text format; 0 when it is absent.
func counter(t *testing.T, metrics, series string) int64 {
	t.Helper()
	for line := range strings.Lines(metrics) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", series, err)
			}
			return int64(n)
		}
	}
	return 0
}
