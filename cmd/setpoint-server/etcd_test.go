package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
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
// the store's etcd latency.
func TestRunOnEtcd(t *testing.T) {
	c := etcdtest.Start(t, 3)
	cfg := defaults(t, "-insecure-dev", "-listen", "127.0.0.1:0", "-metrics-listen", "127.0.0.1:0",
		"-data-dir", filepath.Join(t.TempDir(), "data"), "-store", "etcd",
		"-etcd-endpoints", strings.Join(c.Endpoints, ","), "-etcd-prefix", "/run-test/")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() { done <- run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), ready) }()
	addr := <-ready
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health: %v", err)
	}
	if _, err := setpointv1.NewAutoscalerServiceClient(conn).ListTargets(t.Context(), &setpointv1.ListTargetsRequest{}); err != nil {
		t.Errorf("ListTargets: %v", err)
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
