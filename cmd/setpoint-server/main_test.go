package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func defaults(t *testing.T, args ...string) Config {
	t.Helper()
	var c Config
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		args []string
		ok   bool
	}{
		{"no flags", nil, true},
		{"off loopback without tokens", []string{"-listen", "0.0.0.0:7443"}, false},
		{"off loopback with tokens", []string{"-listen", "0.0.0.0:7443", "-token-file", "t.json"}, true},
		{"off loopback, explicitly open", []string{"-listen", ":7443", "-allow-unauthenticated"}, true},
		{"cert without key", []string{"-tls-cert", "c.pem"}, false},
		{"client CA without cert", []string{"-tls-client-ca", "ca.pem"}, false},
		{"bad listen", []string{"-listen", "7443"}, false},
		{"zero expiry", []string{"-expire-after", "0s"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := defaults(t, tt.args...)
			if err := c.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// TestRunServesAndStops starts the binary's run on a fresh data directory,
// checks health, and stops it as SIGTERM would.
func TestRunServesAndStops(t *testing.T) {
	cfg := defaults(t, "-listen", "127.0.0.1:0", "-metrics-listen", "127.0.0.1:0", "-data-dir", filepath.Join(t.TempDir(), "data"))
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
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "setpoint.db")); err != nil {
		t.Errorf("store file: %v", err)
	}
}
