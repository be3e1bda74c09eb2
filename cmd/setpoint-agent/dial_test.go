package main

import (
	"path/filepath"
	"testing"

	"github.com/setpointhq/setpoint/internal/securetest"
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
			cfg := parse(t, append(base, tt.args...)...)
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			conn, err := dial(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_, err = setpointv1.NewAutoscalerServiceClient(conn).ListTargets(t.Context(), &setpointv1.ListTargetsRequest{Cluster: tt.cluster})
			if status.Code(err) != tt.want {
				t.Errorf("ListTargets: %v, want %v", err, tt.want)
			}
		})
	}
}
