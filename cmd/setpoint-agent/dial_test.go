package main

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	"github.com/setpointhq/setpoint/internal/securetest"
	"github.com/setpointhq/setpoint/internal/servertest"
	"github.com/setpointhq/setpoint/internal/testkit"
	"github.com/setpointhq/setpoint/internal/testpki"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The agent's real flags and dial code connect with mutual TLS or a token.
func TestDialMutualTLSOrToken(t *testing.T) {
	srv := securetest.Start(t, `principals:
- name: agent-a
  role: cluster:a
  certificates: [spiffe://setpoint.test/cluster/a]
  token_sha256: [`+securetest.SHA256("a-token")+`]
`)
	agent := srv.Client(t, "agent", "spiffe://setpoint.test/cluster/a")
	token := filepath.Join(srv.Dir, "token")
	testpki.WriteFile(t, token, []byte("a-token\n"))
	base := []string{"-leader-election-identity=x", "-service-address", srv.Addr, "-tls-server-name", "localhost", "-tls-ca-file", agent.CA}
	tests := []struct {
		name    string
		args    []string
		cluster string
		want    codes.Code
	}{
		{"mutual TLS, own cluster", []string{"-tls-cert-file", agent.Cert, "-tls-key-file", agent.Key}, "a", codes.OK},
		{"mutual TLS, another cluster", []string{"-tls-cert-file", agent.Cert, "-tls-key-file", agent.Key}, "b", codes.PermissionDenied},
		{"token over TLS", []string{"-token-file", token}, "a", codes.OK},
		{"no credentials", nil, "a", codes.Unauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := dialed(t, append(base, tt.args...)...)
			_, err := setpointv1.NewAutoscalerServiceClient(conn).ListTargets(t.Context(), &setpointv1.ListTargetsRequest{Cluster: tt.cluster})
			if status.Code(err) != tt.want {
				t.Errorf("ListTargets: %v, want %v", err, tt.want)
			}
		})
	}
}

// The agent spreads its calls over every server -service-address lists,
// and leaves out one that stopped.
func TestDialSpreadsOverServers(t *testing.T) {
	a := servertest.Start(t, servertest.Config{})
	b := servertest.Start(t, servertest.Config{})
	conn := dialed(t, "-leader-election-identity=x", "-insecure", "-service-address", a.Addr+","+b.Addr)
	client := setpointv1.NewAutoscalerServiceClient(conn)
	answered := func() map[string]int {
		got := map[string]int{}
		for range 10 {
			var p peer.Peer
			if _, err := client.ListTargets(t.Context(), &setpointv1.ListTargetsRequest{}, grpc.Peer(&p)); err != nil {
				t.Fatalf("ListTargets: %v", err)
			}
			got[p.Addr.String()]++
		}
		return got
	}
	testkit.Eventually(t, 5*time.Second, "calls to both servers", func() error {
		if got := answered(); got[a.Addr] == 0 || got[b.Addr] == 0 {
			return fmt.Errorf("answered %v", got)
		}
		return nil
	})
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	if got := answered(); got[b.Addr] != 10 {
		t.Errorf("with %s stopped: answered %v, want every call by %s", a.Addr, got, b.Addr)
	}
	if _, err := dial(parse(t, "-insecure", "-service-address", a.Addr+",nonsense")); err == nil {
		t.Error("a list with an entry that is not host:port was accepted")
	}
}

// dialed returns the agent's connection configured by args (validated),
// closed when the test ends.
func dialed(t *testing.T, args ...string) *grpc.ClientConn {
	t.Helper()
	cfg := parse(t, args...)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	client, err := dial(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client.Conn()
}

// What dial refuses at start, before any call: a bearer token in
// plaintext to another machine, and credential files it cannot read.
func TestDialRefuses(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	testpki.WriteFile(t, token, []byte("a-token\n"))
	missing := filepath.Join(dir, "missing")
	tests := []struct {
		name string
		args []string
	}{
		{"token in plaintext off loopback", []string{"-insecure", "-service-address", "setpoint.example:7443", "-token-file", token}},
		{"missing token file", []string{"-insecure", "-service-address", "127.0.0.1:7443", "-token-file", missing}},
		{"missing CA file", []string{"-service-address", "setpoint.example:7443", "-tls-ca-file", missing}},
		{"missing client certificate", []string{"-service-address", "setpoint.example:7443", "-tls-cert-file", missing, "-tls-key-file", missing}},
	}
	for _, tt := range tests {
		cfg := parse(t, append([]string{"-leader-election-identity=x"}, tt.args...)...)
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if c, err := dial(cfg); err == nil {
			c.Close()
			t.Errorf("%s: dial succeeded", tt.name)
		}
	}
	// A token in plaintext to this machine is a developer's setup.
	c, err := dial(parse(t, "-leader-election-identity=x", "-insecure", "-service-address", "127.0.0.1:7443", "-token-file", token))
	if err != nil {
		t.Fatalf("token in plaintext to loopback: %v", err)
	}
	c.Close()
}
