package server_test

import (
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/setpointhq/setpoint/internal/servertest"
	"github.com/setpointhq/setpoint/internal/testkit"
	"github.com/setpointhq/setpoint/server"
)

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// TestOldConnectionsAreAskedToReconnect: past MaxConnectionAge the server
// asks a client to reconnect, so a client balancing over several replicas
// looks its addresses up again and finds added ones; calls keep working.
func TestOldConnectionsAreAskedToReconnect(t *testing.T) {
	tests := []struct {
		name        string
		age         time.Duration
		wantNewConn bool
	}{
		{"age 300ms", 300 * time.Millisecond, true},
		{"kept for ever", -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inner, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			lis := &countingListener{Listener: inner}
			s := servertest.Start(t, servertest.Config{Listener: lis,
				Options: server.Options{MaxConnectionAge: tt.age, MaxConnectionAgeGrace: 200 * time.Millisecond}})
			health := grpc_health_v1.NewHealthClient(dial(t, s.Addr))
			check := func() error {
				_, err := health.Check(t.Context(), &grpc_health_v1.HealthCheckRequest{})
				return err
			}
			if err := check(); err != nil {
				t.Fatal(err)
			}
			if tt.wantNewConn {
				testkit.Eventually(t, 10*time.Second, "a second connection", func() error {
					if n := lis.accepted.Load(); n < 2 {
						_ = check()
						return fmt.Errorf("%d connection(s) accepted", n)
					}
					return nil
				})
				testkit.Eventually(t, 5*time.Second, "a call on the new connection", check)
				return
			}
			deadline := time.Now().Add(1500 * time.Millisecond)
			for time.Now().Before(deadline) {
				if err := check(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if n := lis.accepted.Load(); n != 1 {
				t.Errorf("%d connections accepted, want the first kept", n)
			}
		})
	}
}
