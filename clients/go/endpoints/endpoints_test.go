package endpoints_test

import (
	"fmt"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/setpointhq/setpoint/clients/go/endpoints"
	"github.com/setpointhq/setpoint/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestTarget(t *testing.T) {
	tests := []struct {
		addr, want string
		resolver   bool
		err        bool
	}{
		{addr: "setpoint.example:7443", want: "setpoint.example:7443"},
		{addr: "dns:///setpoint-headless.setpoint-system:7443", want: "dns:///setpoint-headless.setpoint-system:7443"},
		{addr: "a:7443,b:7443", want: "setpoint-list:///a:7443,b:7443", resolver: true},
		{addr: "[::1]:7443, 127.0.0.1:7443", want: "setpoint-list:///[::1]:7443, 127.0.0.1:7443", resolver: true},
		{addr: "", err: true},
		{addr: "a:7443,b", err: true},
		{addr: "a:7443,", err: true},
		{addr: ":7443,b:7443", err: true},
	}
	for _, tt := range tests {
		got, opts, err := endpoints.Target(tt.addr)
		if (err != nil) != tt.err || got != tt.want || (len(opts) > 0) != tt.resolver {
			t.Errorf("Target(%q) = %q, %d options, %v; want %q, a resolver %v, error %v", tt.addr, got, len(opts), err, tt.want, tt.resolver, tt.err)
		}
	}
}

// healthServer serves the gRPC health service alone on loopback.
func healthServer(t *testing.T) (addr string, h *health.Server) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	h = health.NewServer()
	h.SetServingStatus("setpoint.v1.AutoscalerService", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s, h)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().String(), h
}

// A list of servers is resolved to all of them; calls go round-robin to
// those answering SERVING.
func TestListBalancedOverHealthyServers(t *testing.T) {
	a, ha := healthServer(t)
	b, _ := healthServer(t)
	target, opts, err := endpoints.Target(a + "," + b)
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultServiceConfig(endpoints.Balanced))
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	answered := func(n int) map[string]int {
		got := map[string]int{}
		for range n {
			var p peer.Peer
			if _, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{}, grpc.Peer(&p)); err != nil {
				t.Fatal(err)
			}
			got[p.Addr.String()]++
		}
		return got
	}
	// Both, once both are connected: round-robin alternates.
	testkit.Eventually(t, 5*time.Second, "calls to both servers", func() error {
		if got := answered(10); got[a] != 5 || got[b] != 5 {
			return fmt.Errorf("answered %v", got)
		}
		return nil
	})
	ha.SetServingStatus("setpoint.v1.AutoscalerService", healthpb.HealthCheckResponse_NOT_SERVING)
	testkit.Eventually(t, 5*time.Second, "calls to the serving server alone", func() error {
		if got := answered(10); got[b] != 10 {
			return fmt.Errorf("answered %v", got)
		}
		return nil
	})
}
