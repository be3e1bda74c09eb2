package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/securetest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// setpointctl's real flags and dial code connect with mutual TLS or a
// token.
func TestConnectsWithMutualTLSOrToken(t *testing.T) {
	srv := securetest.Start(t, `principals:
- name: ops
  role: admin
  certificates: [spiffe://setpoint.test/ops]
- name: dashboard
  role: platform
  clusters: [dev]
  token_sha256: [`+securetest.SHA256("dash-token")+`]
`)
	ops := srv.Client(t, "ops", "spiffe://setpoint.test/ops")
	tls := []string{"-addr", srv.Addr, "-server-name", "localhost", "-ca", ops.CA}
	tests := []struct {
		name string
		args []string
		want codes.Code
	}{
		{"admin by certificate decides", append(tls, "-cert", ops.Cert, "-key", ops.Key, "recommend", "-f", example), codes.OK},
		{"platform by token reads", append(tls, "-token", "dash-token", "list", "-cluster", "dev"), codes.OK},
		{"platform by token may not delete", append(tls, "-token", "dash-token", "delete", "dev/shop/web"), codes.PermissionDenied},
		{"no credentials", append(tls, "list", "-cluster", "dev"), codes.Unauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &cli{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, now: time.Now}
			err := c.run(t.Context(), tt.args)
			if status.Code(err) != tt.want {
				t.Errorf("setpointctl %v: %v, want %v", tt.args, err, tt.want)
			}
		})
	}
}
