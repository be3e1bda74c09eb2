package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/testkit"
	"github.com/setpointhq/setpoint/internal/testpki"
)

// TestValidateMetricsTLS: -metrics-tls needs the HTTP address, the gRPC
// certificate and key, and no development mode; each refusal names it.
func TestValidateMetricsTLS(t *testing.T) {
	secure := []string{"-tls-cert", "c.pem", "-tls-key", "k.pem", "-auth-config", "p.json", "-metrics-tls"}
	with := func(extra ...string) []string { return append(slices.Clone(secure), extra...) }
	tests := []struct {
		name    string
		args    []string
		wantErr string // "" for none
	}{
		{"with the gRPC certificate", secure, ""},
		{"with client certificates required on gRPC", with("-tls-client-ca", "ca.pem", "-tls-require-client-cert"), ""},
		{"off loopback", with("-metrics-listen", ":9090"), ""},
		{"without the HTTP address", with("-metrics-listen", ""), "-metrics-tls needs -metrics-listen"},
		{"without a certificate", []string{"-auth-config", "p.json", "-metrics-tls"}, "-metrics-tls needs -tls-cert and -tls-key"},
		{"without a key", []string{"-tls-cert", "c.pem", "-auth-config", "p.json", "-metrics-tls"}, "-metrics-tls needs -tls-cert and -tls-key"},
		{"in development mode", []string{"-insecure-dev", "-metrics-tls"}, "-insecure-dev serves plaintext: drop -metrics-tls"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := defaults(t, tt.args...)
			err := c.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Validate() = %v, want an error saying %q", err, tt.wantErr)
			}
		})
	}
}

// TestWarnPlaintextHTTP: a plaintext HTTP address off loopback, with
// authentication on, is announced in the log; nothing else is.
func TestWarnPlaintextHTTP(t *testing.T) {
	secure := []string{"-tls-cert", "c.pem", "-tls-key", "k.pem", "-auth-config", "p.json"}
	with := func(extra ...string) []string { return append(slices.Clone(secure), extra...) }
	tests := []struct {
		name string
		args []string
		warn bool
	}{
		{"all addresses", with("-metrics-listen", ":9090"), true},
		{"all IPv4 addresses", with("-metrics-listen", "0.0.0.0:9090"), true},
		{"a routable address", with("-metrics-listen", "10.1.2.3:9090"), true},
		{"the default loopback address", secure, false},
		{"localhost", with("-metrics-listen", "localhost:7444"), false},
		{"IPv6 loopback", with("-metrics-listen", "[::1]:7444"), false},
		{"TLS off loopback", with("-metrics-listen", ":9090", "-metrics-tls"), false},
		{"disabled", with("-metrics-listen", ""), false},
		{"development mode, which warns of itself", []string{"-insecure-dev", "-metrics-listen", ":9090"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			warnPlaintextHTTP(defaults(t, tt.args...), slog.New(slog.NewJSONHandler(&logs, nil)))
			if got := logs.Len() > 0 && hasRecord(t, logs.Bytes(), "WARN", "plaintext_http"); got != tt.warn {
				t.Errorf("warned = %v, want %v; log:\n%s", got, tt.warn, logs.String())
			}
		})
	}
}

// TestRunServesHTTPOverTLS starts the binary's run with -metrics-tls next
// to gRPC that requires client certificates: the HTTP address serves
// /metrics and the console over TLS (HTTP/2 or HTTP/1.1) with the gRPC
// certificate, reloads it as gRPC does, recognises a client certificate's
// principal without requiring one, and answers plaintext with an error.
func TestRunServesHTTPOverTLS(t *testing.T) {
	dir := t.TempDir()
	serverCA, clientCA, otherCA := testpki.TestCA(t, "server CA"), testpki.TestCA(t, "client CA"), testpki.TestCA(t, "other CA")
	tlsDir := filepath.Join(dir, "tls")
	files := testpki.Write(t, tlsDir, clientCA, serverCA.Issue(t, testpki.Leaf{CommonName: "localhost", Server: true}))
	const token = "ops-token"
	sum := sha256.Sum256([]byte(token))
	principals := filepath.Join(dir, "principals.yaml")
	testpki.WriteFile(t, principals, fmt.Appendf(nil, `principals:
- name: agent-a
  role: cluster:a
  certificates: [spiffe://setpoint.test/cluster/a]
- name: ops
  role: admin
  token_sha256: [%s]
`, hex.EncodeToString(sum[:])))
	cfg := defaults(t, "-listen", "127.0.0.1:0", "-metrics-listen", "127.0.0.1:0", "-metrics-tls", "-data-dir", filepath.Join(dir, "data"),
		"-tls-cert", files.Cert, "-tls-key", files.Key, "-tls-client-ca", files.CA, "-tls-require-client-cert",
		"-auth-config", principals, "-reload-interval", "20ms")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan listening, 1), make(chan error, 1)
	go func() { done <- run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), ready) }()
	addr := (<-ready).http
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()

	agent := clientCA.Issue(t, testpki.Leaf{URI: "spiffe://setpoint.test/cluster/a"})
	stranger := otherCA.Issue(t, testpki.Leaf{URI: "spiffe://setpoint.test/cluster/a"})
	// client trusts the server CA, presents cert when given (even to a
	// server that names other CAs), and offers HTTP/2 unless http1.
	client := func(t *testing.T, cert *testpki.Pair, http1 bool) *http.Client {
		cfg := &tls.Config{RootCAs: serverCA.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS12}
		if cert != nil {
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert.Cert, nil }
		}
		tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: !http1}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: 10 * time.Second}
	}
	get := func(c *http.Client, url, token string) (*http.Response, string, error) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		if err != nil {
			return nil, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp, string(body), err
	}

	tests := []struct {
		name      string
		path      string
		cert      *testpki.Pair
		token     string
		http1     bool
		wantCode  int
		wantBody  string
		wantProto int
	}{
		{"metrics without credentials, as today", "/metrics", nil, "", false, http.StatusOK, "setpoint_server_", 2},
		{"metrics over HTTP/1.1", "/metrics", nil, "", true, http.StatusOK, "setpoint_server_", 1},
		{"console page", "/console/", nil, "", false, http.StatusOK, "<title>Setpoint console</title>", 2},
		{"session with a bearer token but no certificate (-tls-require-client-cert)", "/console/api/session", nil, token, false, http.StatusUnauthorized, "client certificate", 2},
		{"targets with the admin's token but no certificate", "/console/api/targets", nil, token, false, http.StatusUnauthorized, "Unauthenticated", 2},
		{"session with a client certificate", "/console/api/session", &agent, "", false, http.StatusOK, `"principal":"agent-a"`, 2},
		{"the certificate's own cluster", "/console/api/targets?cluster=a", &agent, "", false, http.StatusOK, `"list":`, 2},
		{"another cluster with the certificate", "/console/api/targets?cluster=b", &agent, "", false, http.StatusForbidden, "PermissionDenied", 2},
		{"session without credentials", "/console/api/session", nil, "", false, http.StatusUnauthorized, "Unauthenticated", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body, err := get(client(t, tt.cert, tt.http1), "https://"+addr+tt.path, tt.token)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantCode || !strings.Contains(body, tt.wantBody) {
				t.Errorf("GET %s: %s %.200q, want %d with %q", tt.path, resp.Status, body, tt.wantCode, tt.wantBody)
			}
			if resp.ProtoMajor != tt.wantProto {
				t.Errorf("GET %s over %s, want HTTP/%d", tt.path, resp.Proto, tt.wantProto)
			}
		})
	}

	t.Run("client certificate of another CA", func(t *testing.T) {
		if _, _, err := get(client(t, &stranger, false), "https://"+addr+"/metrics", ""); err == nil {
			t.Error("GET /metrics with a certificate of an unknown CA succeeded, want a refused handshake")
		}
	})
	t.Run("plaintext", func(t *testing.T) {
		resp, body, err := get(client(t, nil, true), "http://"+addr+"/metrics", "")
		if err == nil && (resp.StatusCode != http.StatusBadRequest || strings.Contains(body, "setpoint_server_")) {
			t.Errorf("plaintext GET /metrics: %s %.200q, want 400 without metrics", resp.Status, body)
		}
	})
	t.Run("rotated certificate", func(t *testing.T) {
		rotated := serverCA.Issue(t, testpki.Leaf{CommonName: "localhost", Server: true})
		testpki.Write(t, tlsDir, clientCA, rotated)
		testkit.Eventually(t, 10*time.Second, "the rotated certificate on the HTTP address", func() error {
			conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: serverCA.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS12})
			if err != nil {
				return err
			}
			defer conn.Close()
			if got := conn.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(rotated.Leaf.SerialNumber) != 0 {
				return fmt.Errorf("serial %v, want %v", got, rotated.Leaf.SerialNumber)
			}
			return nil
		})
	})
}
