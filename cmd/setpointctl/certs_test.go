package main

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/servertest"
	"github.com/setpointhq/setpoint/server"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The files certs writes start a real server (its certificate, the CA
// for clients, the principals file), and each client certificate
// authenticates with the role the principals file gives it.
func TestCertsAcceptedByServer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	var out, errs bytes.Buffer
	c := &cli{stdin: strings.NewReader(""), stdout: &out, stderr: &errs, now: time.Now}
	if code := c.execute(t.Context(), []string{"certs", "--dir", dir, "--cluster", "dev", "--cluster", "prod"}); code != exitOK {
		t.Fatalf("certs exited %d: %s", code, errs.String())
	}
	for _, f := range []string{"ca.crt", "ca.key", "server.crt", "server.key", "agent-dev.crt", "agent-dev.key", "agent-prod.crt", "agent-prod.key", "platform.crt", "platform.key", "admin.crt", "admin.key", "principals.yaml"} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, ".key") && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, fi.Mode().Perm())
		}
	}

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tc, err := server.NewTLSConfig(server.TLSFiles{Cert: filepath.Join(dir, "server.crt"), Key: filepath.Join(dir, "server.key"), ClientCA: filepath.Join(dir, "ca.crt")}, server.ReloadOptions{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := server.NewAuthenticator(filepath.Join(dir, "principals.yaml"), server.ReloadOptions{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	addr := servertest.Start(t, servertest.Config{Options: server.Options{TLS: tc, Auth: auth, Logger: log, Now: func() time.Time { return exampleNow }}}).Addr
	as := func(who string, args ...string) error {
		c := &cli{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, now: time.Now}
		tls := []string{"--addr", addr, "--ca", filepath.Join(dir, "ca.crt"), "--cert", filepath.Join(dir, who+".crt"), "--key", filepath.Join(dir, who+".key")}
		return c.run(t.Context(), append(tls, args...))
	}
	tests := []struct {
		who  string
		args []string
		want codes.Code
	}{
		{"agent-dev", []string{"recommend", "-f", example}, codes.OK}, // the example is cluster dev's
		{"agent-prod", []string{"get", "dev/shop/web"}, codes.PermissionDenied},
		{"platform", []string{"list"}, codes.OK},
		{"platform", []string{"delete", "dev/shop/web"}, codes.PermissionDenied},
		{"admin", []string{"delete", "dev/shop/web"}, codes.OK},
	}
	for _, tt := range tests {
		if err := as(tt.who, tt.args...); status.Code(err) != tt.want {
			t.Errorf("%s: setpointctl %v: %v, want %v", tt.who, tt.args, err, tt.want)
		}
	}

	// A second run does not replace a CA in use.
	errs.Reset()
	if code := c.execute(t.Context(), []string{"certs", "--dir", dir}); code != exitFailed || !strings.Contains(errs.String(), "ca.crt already exists") {
		t.Errorf("second certs run exited %d: %s", code, errs.String())
	}
}
