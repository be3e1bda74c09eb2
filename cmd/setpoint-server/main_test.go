package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/setpointhq/setpoint/internal/testpki"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

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
	secure := []string{"-tls-cert", "c.pem", "-tls-key", "k.pem", "-auth-config", "p.json"}
	with := func(extra ...string) []string { return append(slices.Clone(secure), extra...) }
	tests := []struct {
		name string
		args []string
		ok   bool
	}{
		{"no flags: refuses to start without certificates", nil, false},
		{"development mode", []string{"-insecure-dev"}, true},
		{"development mode with principals", []string{"-insecure-dev", "-auth-config", "p.json"}, true},
		{"development mode with TLS flags", []string{"-insecure-dev", "-tls-cert", "c.pem"}, false},
		{"TLS and principals", secure, true},
		{"TLS and principals off loopback", with("-listen", ":7443"), true},
		{"mutual TLS", with("-tls-client-ca", "ca.pem", "-tls-require-client-cert"), true},
		{"required client certificates without a CA", with("-tls-require-client-cert"), false},
		{"TLS without principals", []string{"-tls-cert", "c.pem", "-tls-key", "k.pem"}, false},
		{"cert without key", []string{"-tls-cert", "c.pem", "-auth-config", "p.json"}, false},
		{"bad listen", with("-listen", "7443"), false},
		{"zero expiry", with("-expire-after", "0s"), false},
		{"small journal segments", with("-journal-segment-bytes", "65536"), true},
		{"zero journal segment", with("-journal-segment-bytes", "0"), false},
		{"zero checkpoint interval", with("-checkpoint-interval", "0s"), false},
		{"etcd store", with("-store", "etcd", "-etcd-endpoints", "http://127.0.0.1:2379"), true},
		{"etcd store without endpoints", with("-store", "etcd"), false},
		{"etcd flags with the bbolt store", with("-etcd-endpoints", "http://127.0.0.1:2379"), false},
		{"etcd cert without key", with("-store", "etcd", "-etcd-endpoints", "http://e:2379", "-etcd-cert", "c.pem"), false},
		{"etcd compaction left to etcd", with("-store", "etcd", "-etcd-endpoints", "http://e:2379", "-etcd-compact-every", "0s"), true},
		{"negative etcd compaction", with("-store", "etcd", "-etcd-endpoints", "http://e:2379", "-etcd-compact-every", "-1s"), false},
		{"unknown store", with("-store", "mysql"), false},
		{"rate limit off", with("-rate-limit", "0"), true},
		{"negative rate limit", with("-rate-limit", "-1"), false},
		{"zero burst", with("-rate-burst", "0"), false},
		{"zero pods per request", with("-max-pods-per-request", "0"), false},
		{"zero metrics per request", with("-max-metrics-per-request", "0"), false},
		{"zero keepalive", with("-keepalive-min-time", "0s"), false},
		{"zero reload interval", with("-reload-interval", "0s"), false},
		{"zero simulate steps", with("-max-simulate-steps", "0"), false},
		{"zero simulate pods", with("-max-simulate-pods", "0"), false},
		{"zero watch buffer", with("-watch-buffer", "0"), false},
		{"zero kept changes", with("-max-changes", "0"), false},
		{"larger limits", with("-max-simulate-steps", "5000", "-watch-buffer", "4096", "-max-changes", "100000"), true},
		{"no stream workers", with("-stream-workers", "-1"), true},
		{"zero stream workers", with("-stream-workers", "0"), false},
		{"too many stream workers", with("-stream-workers", "100000"), false},
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
	cfg := defaults(t, "-insecure-dev", "-listen", "127.0.0.1:0", "-metrics-listen", "127.0.0.1:0", "-data-dir", filepath.Join(t.TempDir(), "data"))
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan listening, 1), make(chan error, 1)
	var logs bytes.Buffer
	go func() { done <- run(ctx, cfg, slog.New(slog.NewJSONHandler(&logs, nil)), ready) }()
	addr := (<-ready).grpc
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
	// The development mode announces itself.
	if !hasRecord(t, logs.Bytes(), "WARN", "insecure") {
		t.Errorf("no WARN record with insecure=true in:\n%s", logs.String())
	}
}

// hasRecord reports whether the JSON log holds a record of level with the
// boolean attribute attr set.
func hasRecord(t *testing.T, log []byte, level, attr string) bool {
	t.Helper()
	for line := range bytes.SplitSeq(bytes.TrimSpace(log), []byte("\n")) {
		var r map[string]any
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if r["level"] == level && r[attr] == true {
			return true
		}
	}
	return false
}

// TestRunServesMutualTLS starts the binary's run as in production: TLS with
// client certificates and a principals file, certificates generated here.
func TestRunServesMutualTLS(t *testing.T) {
	dir := t.TempDir()
	serverCA, clientCA := testpki.TestCA(t, "server CA"), testpki.TestCA(t, "client CA")
	files := testpki.Write(t, dir, clientCA, serverCA.Issue(t, testpki.Leaf{CommonName: "localhost", Server: true}))
	principals := filepath.Join(dir, "principals.yaml")
	testpki.WriteFile(t, principals, []byte("principals:\n- name: agent-a\n  role: cluster:a\n  certificates: [spiffe://setpoint.test/cluster/a]\n"))
	cfg := defaults(t, "-listen", "127.0.0.1:0", "-metrics-listen", "", "-data-dir", filepath.Join(dir, "data"),
		"-tls-cert", files.Cert, "-tls-key", files.Key, "-tls-client-ca", files.CA, "-auth-config", principals)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan listening, 1), make(chan error, 1)
	go func() { done <- run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), ready) }()
	addr := (<-ready).grpc
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	agent := clientCA.Issue(t, testpki.Leaf{URI: "spiffe://setpoint.test/cluster/a"})
	tests := []struct {
		name  string
		creds credentials.TransportCredentials
		want  codes.Code
	}{
		{"agent certificate", credentials.NewTLS(&tls.Config{RootCAs: serverCA.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{agent.Cert}, MinVersion: tls.VersionTLS12}), codes.OK},
		{"no client certificate", credentials.NewTLS(&tls.Config{RootCAs: serverCA.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS12}), codes.Unauthenticated},
		{"plaintext", insecure.NewCredentials(), codes.Unavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(tt.creds))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_, err = setpointv1.NewAutoscalerServiceClient(conn).ListTargets(t.Context(), &setpointv1.ListTargetsRequest{Cluster: "a"})
			if status.Code(err) != tt.want {
				t.Errorf("ListTargets: %v, want %v", err, tt.want)
			}
		})
	}
}
